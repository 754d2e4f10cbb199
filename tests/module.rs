//! The module kind (SPEC.md §7): filters that are the server's own `BF.*` Bloom filters, against
//! a private `redis-server` with RedisBloom loaded (tests/common/module.rs): answers, interop
//! both ways with raw `BF.*` commands, mismatches, shards, info, clear, expire, refusals, and
//! "new" exactly once across retries.

mod common;

use common::module::{redis_with_bloom, redis_without_bloom};
use redbloom::{Builder, Error, KeyTtl, ModuleBloom, StoredParams};
use redis::aio::MultiplexedConnection;
use redis::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn module(key: &str) -> Builder<redbloom::kind::Module> {
    ModuleBloom::builder(key)
        .expected_items(10_000)
        .false_positive_rate(0.001)
}

/// `BF.INFO key` as (name, integer or -1 for nil) pairs.
async fn bf_info(conn: &mut MultiplexedConnection, key: &str) -> Vec<(String, i64)> {
    let reply: Vec<Value> = redis::cmd("BF.INFO")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap();
    reply
        .chunks(2)
        .map(|pair| {
            let name: String = redis::from_redis_value(pair[0].clone()).unwrap();
            let value = match &pair[1] {
                Value::Int(n) => *n,
                _ => -1,
            };
            (name, value)
        })
        .collect()
}

fn field(info: &[(String, i64)], name: &str) -> i64 {
    info.iter().find(|(n, _)| n == name).unwrap().1
}

async fn raw(conn: &mut MultiplexedConnection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query_async(conn).await.unwrap()
}

async fn key_type(conn: &mut MultiplexedConnection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query_async(conn).await.unwrap()
}

#[tokio::test]
async fn the_harness_server_has_the_bloom_commands() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    let key = common::unique_key("module-harness");
    let added: Vec<i64> = redis::cmd("BF.MADD")
        .arg(&key)
        .arg(&["a", "b", "a"])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(added, [1, 1, 0]);
}

#[tokio::test]
async fn adds_say_new_once_and_raw_commands_see_them() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    let key = common::unique_key("module-answers");
    let bloom = module(&key).growth(4).build(conn.clone()).unwrap();
    assert!(
        !bloom.exists("a").await.unwrap(),
        "a missing filter holds nothing"
    );
    assert!(
        !common::key_exists(&mut conn, &key).await,
        "a check makes nothing"
    );
    assert!(bloom.add("a").await.unwrap());
    assert!(!bloom.add("a").await.unwrap(), "new once");
    let batch: Vec<String> = (0..2_500).map(|i| format!("item:{i}")).collect();
    let mut with_repeats = batch.clone();
    with_repeats.push("item:7".to_owned());
    with_repeats.push("a".to_owned());
    let answers = bloom.add_many(&with_repeats).await.unwrap();
    assert_eq!(
        answers.iter().filter(|&&n| n).count(),
        2_500,
        "each new once"
    );
    assert!(
        !answers[2_500] && !answers[2_501],
        "repeats and earlier adds are not new"
    );
    assert!(bloom.exists_many(&batch).await.unwrap().iter().all(|&f| f));
    // The key is the module's own filter, made with the builder's parameters.
    assert_eq!(key_type(&mut conn, &key).await, "MBbloom--");
    let info = bf_info(&mut conn, &key).await;
    assert_eq!(field(&info, "Capacity"), 10_000);
    assert_eq!(field(&info, "Expansion rate"), 4);
    assert_eq!(field(&info, "Number of items inserted"), 2_501);
    let found: Vec<i64> = redis::cmd("BF.MEXISTS")
        .arg(&key)
        .arg(&["a", "item:0", "item:2499"])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(found, [1, 1, 1]);
    // Its parameters are stored beside it: it opens with its key alone.
    let stored = StoredParams::read(&mut conn, &key).await.unwrap().unwrap();
    assert_eq!(stored.kind().unwrap(), redbloom::kind::KindName::Module);
    let reopened = stored
        .builder::<redbloom::kind::Module>()
        .unwrap()
        .build(conn.clone())
        .unwrap();
    assert_eq!((reopened.capacity(), reopened.growth()), (10_000, Some(4)));
    assert!(reopened.exists("item:42").await.unwrap());
    // Items never added are mostly absent (rate 0.001).
    let never: Vec<String> = (0..2_000).map(|i| format!("never:{i}")).collect();
    let false_positives = bloom
        .exists_many(&never)
        .await
        .unwrap()
        .iter()
        .filter(|&&f| f)
        .count();
    assert!(
        false_positives < 20,
        "{false_positives} false positives of 2000"
    );
}

#[tokio::test]
async fn a_filter_made_by_raw_commands_is_read_and_written() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    // Made by BF.RESERVE with an expansion, and by BF.ADD's defaults.
    let reserved = common::unique_key("module-reserved");
    raw(
        &mut conn,
        &["BF.RESERVE", &reserved, "0.01", "500", "EXPANSION", "3"],
    )
    .await;
    raw(&mut conn, &["BF.ADD", &reserved, "raw"]).await;
    let bloom = ModuleBloom::builder(&reserved)
        .expected_items(500)
        .false_positive_rate(0.01)
        .growth(3)
        .build(conn.clone())
        .unwrap();
    assert!(bloom.exists("raw").await.unwrap(), "read what BF.ADD added");
    assert_eq!(
        bloom.add_many(&["raw", "ours"]).await.unwrap(),
        [false, true]
    );
    assert_eq!(
        raw(&mut conn, &["BF.EXISTS", &reserved, "ours"]).await,
        Value::Int(1)
    );
    assert!(
        StoredParams::read(&mut conn, &reserved)
            .await
            .unwrap()
            .is_none(),
        "nothing stored beside another client's filter"
    );
    let defaults = common::unique_key("module-bf-add");
    raw(&mut conn, &["BF.ADD", &defaults, "x"]).await;
    // No growth given: any expansion of a scaling filter agrees.
    let bloom = module(&defaults).build(conn.clone()).unwrap();
    assert!(bloom.exists("x").await.unwrap());
    assert!(bloom.add("y").await.unwrap());
    let info = bloom.info().await.unwrap();
    assert_eq!(
        (info.capacity, info.items, info.expansion),
        (100, 2, Some(2))
    );
    // And the reverse: raw commands read and write a filter redbloom made.
    let ours = common::unique_key("module-ours");
    let bloom = module(&ours).build(conn.clone()).unwrap();
    bloom.add("from-redbloom").await.unwrap();
    assert_eq!(
        raw(&mut conn, &["BF.EXISTS", &ours, "from-redbloom"]).await,
        Value::Int(1)
    );
    assert_eq!(
        raw(&mut conn, &["BF.ADD", &ours, "from-cli"]).await,
        Value::Int(1)
    );
    assert!(bloom.exists("from-cli").await.unwrap());
    assert!(!bloom.add("from-cli").await.unwrap());
}

#[tokio::test]
async fn other_parameters_are_a_mismatch_and_write_nothing() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    // Another client's filter whose expansion differs.
    let key = common::unique_key("module-mismatch");
    raw(
        &mut conn,
        &["BF.RESERVE", &key, "0.01", "500", "EXPANSION", "4"],
    )
    .await;
    let bloom = module(&key).growth(2).build(conn.clone()).unwrap();
    let err = bloom.add_many(&["a", "b"]).await.unwrap_err();
    assert!(matches!(err, Error::ParamsMismatch { .. }), "{err}");
    assert!(err.to_string().contains("expansion=4"), "{err}");
    assert_eq!(
        field(&bf_info(&mut conn, &key).await, "Number of items inserted"),
        0
    );
    assert!(matches!(
        bloom.clear().await,
        Err(Error::ParamsMismatch { .. })
    ));
    assert!(
        common::key_exists(&mut conn, &key).await,
        "a mismatch clears nothing"
    );
    // A non-scaling filter of another capacity.
    let fixed = common::unique_key("module-nonscaling");
    raw(
        &mut conn,
        &["BF.RESERVE", &fixed, "0.01", "50", "NONSCALING"],
    )
    .await;
    let bloom = module(&fixed).build(conn.clone()).unwrap();
    let err = bloom.add("a").await.unwrap_err();
    assert!(err.to_string().contains("nonscaling"), "{err}");
    assert!(matches!(
        bloom.exists("a").await,
        Err(Error::ParamsMismatch { .. })
    ));
    // A filter redbloom made, opened with another capacity.
    let ours = common::unique_key("module-stored");
    module(&ours)
        .build(conn.clone())
        .unwrap()
        .add("a")
        .await
        .unwrap();
    let other = ModuleBloom::builder(&ours)
        .expected_items(20_000)
        .false_positive_rate(0.001)
        .build(conn.clone())
        .unwrap();
    let err = other.add("b").await.unwrap_err();
    assert!(matches!(err, Error::ParamsMismatch { .. }), "{err}");
    assert_eq!(
        raw(&mut conn, &["BF.EXISTS", &ours, "b"]).await,
        Value::Int(0)
    );
    // A key of another type.
    let string = common::unique_key("module-string");
    common::set_bytes(&mut conn, &string, b"not a filter").await;
    let err = module(&string)
        .build(conn.clone())
        .unwrap()
        .add("a")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err}");
}

#[tokio::test]
async fn a_full_nonscaling_filter_refuses_and_says_how_many_went_in() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    let key = common::unique_key("module-full");
    raw(&mut conn, &["BF.RESERVE", &key, "0.001", "5", "NONSCALING"]).await;
    let bloom = ModuleBloom::builder(&key)
        .expected_items(5)
        .false_positive_rate(0.001)
        .build(conn.clone())
        .unwrap();
    let items: Vec<String> = (0..8).map(|i| format!("i{i}")).collect();
    match bloom.add_many(&items).await {
        Err(Error::FilterFull { added, .. }) => assert_eq!(added, 5),
        other => panic!("{other:?}"),
    }
    assert!(bloom.exists("i4").await.unwrap());
}

#[tokio::test]
async fn shards_are_module_keys_in_their_own_slots() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    let key = common::unique_key("module-shards");
    let bloom = module(&key).shards(4).build(conn.clone()).unwrap();
    let items: Vec<String> = (0..4_000).map(|i| format!("s{i}")).collect();
    let answers = bloom.add_many(&items).await.unwrap();
    assert!(answers.iter().all(|&n| n));
    assert!(bloom.add_many(&items).await.unwrap().iter().all(|&n| !n));
    assert!(bloom.exists_many(&items).await.unwrap().iter().all(|&f| f));
    assert!(bloom.add("single").await.unwrap());
    let shards = common::keys_like(&mut conn, &format!("*{key}:shard:*")).await;
    assert_eq!(shards.len(), 4, "{shards:?}");
    let mut inserted = 0;
    for shard in &shards {
        assert_eq!(key_type(&mut conn, shard).await, "MBbloom--");
        let info = bf_info(&mut conn, shard).await;
        assert_eq!(
            field(&info, "Capacity"),
            2_500,
            "each shard holds its share"
        );
        let n = field(&info, "Number of items inserted");
        assert!((700..1_300).contains(&n), "items spread over shards: {n}");
        inserted += n;
    }
    assert_eq!(inserted, 4_001);
    assert!(
        !common::key_exists(&mut conn, &key).await,
        "the bare name is not touched"
    );
    let info = bloom.info().await.unwrap();
    assert_eq!(
        (info.capacity, info.items, info.filters),
        (10_000, 4_001, 4)
    );
    // A shard no item went to yet is no lost data.
    let few = module(&common::unique_key("module-few"))
        .shards(4)
        .build(conn.clone())
        .unwrap();
    assert!(few.add("only").await.unwrap());
    let others: Vec<String> = (0..50).map(|i| format!("other{i}")).collect();
    assert!(few.exists_many(&others).await.unwrap().iter().all(|&f| !f));
    for other in &others[..10] {
        assert!(!few.exists(other).await.unwrap());
    }
    // Another shard count is a mismatch.
    let other = module(&key).shards(2).build(conn.clone()).unwrap();
    assert!(matches!(
        other.add("x").await,
        Err(Error::ParamsMismatch { .. })
    ));
    assert!(bloom.clear().await.unwrap());
    assert!(common::keys_like(&mut conn, &format!("*{key}*"))
        .await
        .is_empty());
}

#[tokio::test]
async fn info_clear_and_expire() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    let key = common::unique_key("module-info");
    let bloom = module(&key).build(conn.clone()).unwrap();
    let info = bloom.info().await.unwrap();
    assert_eq!(
        (info.capacity, info.items, info.ttl),
        (0, 0, KeyTtl::Missing)
    );
    bloom.add_many(&["a", "b", "c"]).await.unwrap();
    let info = bloom.info().await.unwrap();
    assert_eq!((info.capacity, info.items, info.filters), (10_000, 3, 1));
    assert_eq!((info.expansion, info.ttl), (Some(2), KeyTtl::Persistent));
    assert!(info.bytes > 0);
    assert_eq!(info.false_positive_rate, 0.001);
    assert!(bloom.expire(Duration::from_secs(100)).await.unwrap());
    let params = common::companion(&key, "params");
    for k in [&key, &params] {
        let ttl = common::pttl(&mut conn, k).await;
        assert!((90_000..=100_000).contains(&ttl), "{k}: {ttl}");
    }
    assert!(matches!(
        bloom.info().await.unwrap().ttl,
        KeyTtl::Expires(_)
    ));
    assert!(bloom.clear().await.unwrap());
    assert!(common::keys_like(&mut conn, &format!("*{key}*"))
        .await
        .is_empty());
    assert!(!bloom.clear().await.unwrap(), "nothing left to clear");
    assert!(
        bloom.add("after").await.unwrap(),
        "made again after a clear"
    );
    assert_eq!(field(&bf_info(&mut conn, &key).await, "Capacity"), 10_000);
}

#[tokio::test]
async fn a_server_without_the_module_is_refused_by_name() {
    let redis = redis_without_bloom();
    let mut conn = redis.connection().await;
    let key = common::unique_key("module-none");
    let bloom = module(&key).build(conn.clone()).unwrap();
    for err in [
        bloom.add("a").await.unwrap_err(),
        bloom.exists("a").await.unwrap_err(),
        bloom.info().await.map(drop).unwrap_err(),
    ] {
        match &err {
            Error::MissingCommands { missing, .. } => {
                assert!(missing.contains(&"BF.MADD".to_owned()), "{missing:?}");
                assert_eq!(missing.len(), 6, "{missing:?}");
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("drop --module"), "{err}");
    }
    assert!(
        common::keys_like(&mut conn, "*").await.is_empty(),
        "nothing written"
    );
}

#[tokio::test]
async fn what_the_module_cannot_do_is_refused() {
    let near = module("k").near_cache(redbloom::NearCache::new(Duration::from_secs(1)));
    let err = near.validate().unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)) && err.to_string().contains("near cache"));
    assert!(module("k").growth(0).validate().is_err());
    assert!(ModuleBloom::builder("k")
        .expected_items(10)
        .validate()
        .is_err());
    let redis = redis_with_bloom();
    let conn = redis.connection().await;
    let key = common::unique_key("module-export");
    let bloom = module(&key).build(conn).unwrap();
    bloom.add("a").await.unwrap();
    let mut file = Vec::new();
    bloom.export(&mut file).await.unwrap();
    let err = bloom
        .import(&file[..], redbloom::ImportMode::Merge)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    assert!(err.to_string().contains("not items"), "{err}");
}

/// Adds from 8 tasks, 60 calls of 20 items each, while the server is stopped twice for 700 ms
/// with commands in flight (their replies time out, and the retry meets the first attempt's
/// effect): the items answered new.
async fn new_under_stalls(exact: bool) -> (usize, usize) {
    let redis = redis_with_bloom();
    let url = redis.private_server_url().unwrap();
    let build = |key: &str| {
        // Room enough that no false positive (which depends on the order items arrive in)
        // makes the two loads' answers differ.
        let builder = ModuleBloom::builder(key)
            .expected_items(200_000)
            .false_positive_rate(1e-6)
            .retry(common::fault_retry())
            .exact_retries(exact);
        let url = url.clone();
        async move {
            builder
                .build(common::impatient(&url, Duration::from_millis(150)).await)
                .unwrap()
        }
    };
    let (tasks, calls, per_call) = (8, 60, 20);
    let batch = |task: usize, call: usize| -> Vec<String> {
        (0..per_call)
            .map(|i| format!("exact:{task}:{call}:{i}"))
            .collect()
    };
    let reference = build("reference").await;
    let mut want = 0;
    for task in 0..tasks {
        for call in 0..calls {
            let answers = reference.add_many(&batch(task, call)).await.unwrap();
            want += answers.iter().filter(|&&n| n).count();
        }
    }
    let bloom = build("stalled").await;
    let progress = Arc::new(AtomicUsize::new(0));
    let running: Vec<_> = (0..tasks)
        .map(|task| {
            let (bloom, progress) = (bloom.clone(), progress.clone());
            tokio::spawn(async move {
                let mut new = 0;
                for call in 0..calls {
                    let items: Vec<String> = (0..per_call)
                        .map(|i| format!("exact:{task}:{call}:{i}"))
                        .collect();
                    let answers = bloom.add_many(&items).await.expect("add under stalls");
                    new += answers.iter().filter(|&&n| n).count();
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                new
            })
        })
        .collect();
    let mut redis = redis;
    let server = redis.private_server().unwrap();
    let total = tasks * calls;
    for at in [total / 4, total / 2] {
        while progress.load(Ordering::Relaxed) < at {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        server.pause();
        tokio::time::sleep(Duration::from_millis(700)).await;
        server.resume();
    }
    let mut got = 0;
    for task in running {
        got += task.await.unwrap();
    }
    (got, want)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_means_new_across_retries() {
    let (got, want) = new_under_stalls(true).await;
    assert_eq!(
        got, want,
        "items answered new under stalls, against a clean load"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_exact_answers_a_retried_madd_says_seen() {
    let (got, want) = new_under_stalls(false).await;
    assert!(
        got < want,
        "the stalls reached no command in flight: {got} of {want}"
    );
}

#[tokio::test]
async fn a_filter_gone_under_its_parameters_is_lost_not_absent() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    let key = common::unique_key("module-lost");
    let bloom = module(&key).build(conn.clone()).unwrap();
    bloom.add("a").await.unwrap();
    assert!(!bloom.exists("never").await.unwrap(), "there, and absent");
    raw(&mut conn, &["DEL", &key]).await;
    assert!(matches!(bloom.exists("a").await, Err(Error::Lost { .. })));
    // A sharded filter's first add makes every shard, with this filter's parameters (a share
    // of the capacity each), before its parameters are stored: a shard that no item reached
    // and that is gone is lost too.
    let sharded = common::unique_key("module-lost-sharded");
    let bloom = module(&sharded).shards(3).build(conn.clone()).unwrap();
    assert!(bloom.add("a").await.unwrap());
    let shards: Vec<String> = common::keys_like(&mut conn, &format!("*{sharded}:shard:*"))
        .await
        .into_iter()
        .filter(|key| !key.contains(":redbloom:"))
        .collect();
    assert_eq!(shards.len(), 3, "{shards:?}");
    for shard in &shards {
        assert_eq!(key_type(&mut conn, shard).await, "MBbloom--");
        assert_eq!(field(&bf_info(&mut conn, shard).await, "Capacity"), 3_334);
    }
    let mut empty = None;
    for shard in &shards {
        if field(&bf_info(&mut conn, shard).await, "Number of items inserted") == 0 {
            empty = Some(shard.clone());
        }
    }
    let empty = empty.expect("a shard no item reached");
    raw(&mut conn, &["DEL", &empty]).await;
    let items: Vec<String> = (0..30).map(|i| format!("i{i}")).collect();
    match bloom.exists_many(&items).await {
        Err(Error::Lost { key, .. }) => assert_eq!(key, empty),
        other => panic!("a gone shard read as {other:?}"),
    }
    assert!(bloom.exists("a").await.unwrap(), "the other shards answer");
    // Another client's filter has no parameters: gone is gone.
    let foreign = common::unique_key("module-lost-foreign");
    raw(&mut conn, &["BF.ADD", &foreign, "x"]).await;
    let other = module(&foreign).build(conn.clone()).unwrap();
    assert!(other.exists("x").await.unwrap());
    raw(&mut conn, &["DEL", &foreign]).await;
    assert!(!other.exists("x").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_adds_from_many_tasks_say_new_once_by_group_commit() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    let key = common::unique_key("module-group");
    let bloom = module(&key).build(conn.clone()).unwrap();
    // 64 tasks add the same 500 items one at a time: each item is new to exactly one of them.
    let tasks: Vec<_> = (0..64)
        .map(|task| {
            let bloom = bloom.clone();
            tokio::spawn(async move {
                let mut new = 0;
                for i in 0..500 {
                    let item = format!("g{}", (i + task * 7) % 500);
                    new += usize::from(bloom.add(&item).await.unwrap());
                }
                new
            })
        })
        .collect();
    let mut new = 0;
    for task in tasks {
        new += task.await.unwrap();
    }
    assert_eq!(new, 500);
    assert_eq!(bloom.info().await.unwrap().items, 500);
    let madds = common::calls(&mut conn, "bf.madd").await;
    assert!(
        madds < 64 * 500 / 2,
        "single adds went together: {madds} BF.MADD calls"
    );
}

/// A primary and a replica, both with the module, the replica in sync.
async fn primary_and_replica() -> (common::server::RedisServer, common::server::RedisServer) {
    let module = common::module::module_path();
    let module = module.to_string_lossy();
    let args = ["--save", "", "--appendonly", "no", "--loadmodule", &module];
    let primary = common::server::RedisServer::start_with(&args).unwrap();
    let port = primary.port().to_string();
    let replica_args = [&args[..], &["--replicaof", "127.0.0.1", &port]].concat();
    let replica = common::server::RedisServer::start_with(&replica_args).unwrap();
    let mut conn = redis::Client::open(replica.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for _ in 0..400 {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut conn)
            .await
            .unwrap();
        if info.contains("master_link_status:up") {
            return (primary, replica);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the replica never synced");
}

#[tokio::test]
async fn writes_wait_for_replicas() {
    let (primary, replica) = primary_and_replica().await;
    let conn = |url: String| async move {
        redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    };
    let key = common::unique_key("module-wait");
    let bloom = module(&key)
        .wait_for_replicas(1, Duration::from_secs(5))
        .build(conn(primary.url()).await)
        .unwrap();
    let items: Vec<String> = (0..300).map(|i| format!("w{i}")).collect();
    assert!(bloom.add_many(&items).await.unwrap().iter().all(|&n| n));
    assert!(bloom.add("one").await.unwrap());
    let mut on_replica = conn(replica.url()).await;
    let found: Vec<i64> = redis::cmd("BF.MEXISTS")
        .arg(&key)
        .arg(&items)
        .arg("one")
        .query_async(&mut on_replica)
        .await
        .unwrap();
    assert!(
        found.iter().all(|&f| f == 1),
        "the replica had every add when it returned"
    );
    let two = module(&key)
        .wait_for_replicas(2, Duration::from_millis(200))
        .build(conn(primary.url()).await)
        .unwrap();
    match two.add("more").await {
        Err(Error::NotReplicated { acked, wanted }) => assert_eq!((acked, wanted), (1, 2)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_acl_without_bf_commands_is_refused_naming_them() {
    let redis = redis_with_bloom();
    let mut admin = redis.connection().await;
    let () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "nobf",
            "on",
            ">pw",
            "~*",
            "&*",
            "+@all",
            "-bf.madd",
            "-bf.mexists",
            "-bf.reserve",
            "-bf.add",
            "-bf.exists",
            "-bf.info",
        ])
        .query_async(&mut admin)
        .await
        .unwrap();
    let url = redis.url().replace("redis://", "redis://nobf:pw@");
    let conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let key = common::unique_key("module-acl");
    let bloom = module(&key)
        .retry(common::fault_retry())
        .build(conn)
        .unwrap();
    let chain = |err: &Error| format!("{err}: {}", std::error::Error::source(err).unwrap());
    let err = bloom.add("a").await.unwrap_err();
    assert!(matches!(err, Error::NoPermission(_)), "{err:?}");
    assert!(chain(&err).contains("'BF.MADD'"), "{}", chain(&err));
    assert!(
        bloom.exact_retries(),
        "the recording was not what the ACL refused"
    );
    let err = bloom.exists("a").await.unwrap_err();
    assert!(matches!(err, Error::NoPermission(_)), "{err:?}");
    assert!(
        chain(&err).to_ascii_lowercase().contains("bf.mexists"),
        "{}",
        chain(&err)
    );
    assert!(
        !common::key_exists(&mut admin, &key).await,
        "nothing written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_server_meets_the_call_deadline() {
    let mut redis = redis_with_bloom();
    let key = common::unique_key("module-deadline");
    // Replies may take 10 s on this connection: the call's deadline ends it first.
    let bloom = module(&key)
        .timeout(Duration::from_millis(400))
        .retry(common::fault_retry())
        .build(redis.connection().await)
        .unwrap();
    bloom.add("a").await.unwrap();
    let server = redis.private_server().unwrap();
    server.pause();
    let started = std::time::Instant::now();
    let err = bloom.add("b").await.unwrap_err();
    let took = started.elapsed();
    server.resume();
    assert!(matches!(err, Error::Deadline(_)), "{err:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// The ACL of docs/security.md's "Module filters" for the filter `key`.
fn module_acl(key: &str) -> Vec<String> {
    let line = format!(
        "SETUSER app on >pw ~{key} ~{{{key}}}:redbloom:*:{key}:params \
         ~{{{key}}}:redbloom:*:{key}:once:* ~{{rb*}}:{key}:shard:* -@all +bf.reserve +bf.madd \
         +bf.insert +bf.mexists +bf.info +evalsha +eval +get +set +exists +pttl +pexpire +del \
         +hget +time +hmget +hdel +hset +unlink +info +wait"
    );
    line.split_whitespace().map(str::to_owned).collect()
}

#[tokio::test]
async fn the_documented_acl_is_enough() {
    let redis = redis_with_bloom();
    let mut admin = redis.connection().await;
    for shards in [1, 3] {
        let key = common::unique_key("module-acl-doc");
        let () = redis::cmd("ACL")
            .arg(module_acl(&key))
            .query_async(&mut admin)
            .await
            .unwrap();
        let url = redis.url().replace("redis://", "redis://app:pw@");
        let conn = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let bloom = module(&key)
            .shards(shards)
            .retry(common::fault_retry())
            .wait_for_replicas(0, Duration::from_millis(100))
            .build(conn.clone())
            .unwrap();
        let items: Vec<String> = (0..1_500).map(|i| format!("a{i}")).collect();
        assert!(bloom.add_many(&items).await.unwrap().iter().all(|&n| n));
        assert!(bloom.add("one").await.unwrap());
        assert!(bloom.exact_retries(), "{shards} shards: writes recorded");
        assert!(bloom.exists_many(&items).await.unwrap().iter().all(|&f| f));
        assert!(!bloom.exists("never").await.unwrap());
        assert_eq!(bloom.info().await.unwrap().items, 1_501);
        // Without records, adds into the key go as bare BF.INSERT: the ACL allows it.
        let bare = module(&key)
            .shards(shards)
            .exact_retries(false)
            .build(conn.clone())
            .unwrap();
        let before = inserts(&mut admin).await;
        assert!(!bare.add("one").await.unwrap());
        assert!(bare.add("two").await.unwrap());
        assert!(
            inserts(&mut admin).await > before,
            "{shards} shards: BF.INSERT went"
        );
        assert!(bloom.expire(Duration::from_secs(60)).await.unwrap());
        assert!(bloom.clear().await.unwrap());
        assert!(common::keys_like(&mut admin, &format!("*{key}*"))
            .await
            .is_empty());
    }
}

/// How many `BF.INSERT` commands the server has run (`INFO commandstats`).
async fn inserts(conn: &mut MultiplexedConnection) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    common::commandstats_calls(&stats, "bf.insert")
}

/// Adds that need no record (exact answers across retries off) into a key known to exist go
/// as bare `BF.INSERT KEY NOCREATE`: the same answers, the filter never made with the
/// module's defaults when its key is gone, and a full filter refused as by the script.
#[tokio::test]
async fn adds_without_records_go_bare_and_answer_the_same() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    for shards in [1, 3] {
        let key = common::unique_key("module-bare");
        let bloom = module(&key)
            .shards(shards)
            .exact_retries(false)
            .build(conn.clone())
            .unwrap();
        let first: Vec<String> = (0..300).map(|i| format!("a{i}")).collect();
        let second: Vec<String> = (150..450).map(|i| format!("a{i}")).collect();
        let before = inserts(&mut conn).await;
        assert!(bloom.add_many(&first).await.unwrap().iter().all(|&new| new));
        let answers = bloom.add_many(&second).await.unwrap();
        assert_eq!(answers[..150], [false; 150], "{shards} shards: seen");
        assert!(
            answers[150..].iter().all(|&new| new),
            "{shards} shards: new"
        );
        assert!(
            inserts(&mut conn).await > before,
            "{shards} shards: the second batch went bare"
        );
        assert!(bloom.exists_many(&second).await.unwrap().iter().all(|&f| f));
    }
    // Its key deleted by hand under its stored parameters: a lost filter (SPEC.md §3), refused
    // and not made again (`NOCREATE` refuses, and so does the script); after `clear` the script
    // makes it again with this client's parameters (not `BF.INSERT`'s defaults: capacity 100).
    let key = common::unique_key("module-bare-gone");
    let bloom = module(&key)
        .exact_retries(false)
        .build(conn.clone())
        .unwrap();
    bloom.add("a").await.unwrap();
    assert!(!bloom.add("a").await.unwrap());
    raw(&mut conn, &["DEL", &key]).await;
    match bloom.add("b").await {
        Err(Error::Lost { key: gone, .. }) => assert_eq!(gone, key),
        other => panic!("expected Error::Lost, got {other:?}"),
    }
    assert!(!common::key_exists(&mut conn, &key).await, "made again");
    bloom.clear().await.unwrap();
    assert!(bloom.add("b").await.unwrap());
    assert_eq!(field(&bf_info(&mut conn, &key).await, "Capacity"), 10_000);
    // Full: the bare command's refusal, item by item, as the script's.
    let full = common::unique_key("module-bare-full");
    raw(
        &mut conn,
        &["BF.RESERVE", &full, "0.001", "5", "NONSCALING"],
    )
    .await;
    let bloom = ModuleBloom::builder(&full)
        .expected_items(5)
        .false_positive_rate(0.001)
        .exact_retries(false)
        .build(conn.clone())
        .unwrap();
    assert_eq!(
        bloom.add_many(&["i0", "i1", "i2"]).await.unwrap(),
        [true; 3]
    );
    let before = inserts(&mut conn).await;
    let items: Vec<String> = (3..8).map(|i| format!("i{i}")).collect();
    match bloom.add_many(&items).await {
        Err(Error::FilterFull { added, .. }) => assert_eq!(added, 2),
        other => panic!("{other:?}"),
    }
    assert_eq!(inserts(&mut conn).await, before + 1, "refused by BF.INSERT");
    assert!(bloom.exists("i4").await.unwrap());
    assert!(!bloom.exists("i5").await.unwrap());
}
