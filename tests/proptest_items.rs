//! Property: for any batch of arbitrary byte strings (empty ones and repeats included) and any
//! small filter, `add_many` answers and writes exactly what one `add` per item does, and
//! every added item is found, with either engine.

mod common;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use redbloom::{Engine, RedisBloom};
use redis::aio::MultiplexedConnection;

/// Up to 40 items of up to 64 arbitrary bytes; a few values are made likely so that empty
/// items and repeats occur often.
fn batches() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let item = prop_oneof![
        3 => vec(any::<u8>(), 0..64),
        1 => Just(Vec::new()),
        1 => vec(0u8..2, 0..3),
    ];
    vec(item, 0..40)
}

fn sizes() -> impl Strategy<Value = u64> {
    prop_oneof![64u64..=256, 64u64..=100_000]
}

async fn bytes(conn: &mut MultiplexedConnection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("GET").arg(key).query_async(conn).await.unwrap()
}

/// Checks the property for one engine; returns the batch key's bytes.
async fn check(
    conn: &mut MultiplexedConnection,
    engine: Engine,
    bits: u64,
    items: &[Vec<u8>],
) -> Result<Option<Vec<u8>>, TestCaseError> {
    let batch = RedisBloom::new(conn.clone(), common::unique_key("prop-batch"), bits)
        .unwrap()
        .with_engine(engine);
    let single = RedisBloom::new(conn.clone(), common::unique_key("prop-single"), bits)
        .unwrap()
        .with_engine(engine);

    let batch_flags = batch.add_many(items).await.unwrap();
    let mut single_flags = Vec::with_capacity(items.len());
    for item in items {
        single_flags.push(single.add(item).await.unwrap());
    }
    prop_assert_eq!(
        &batch_flags,
        &single_flags,
        "{:?}: add_many's flags differ from one add per item",
        engine
    );
    let batch_bytes = bytes(conn, batch.key()).await;
    prop_assert_eq!(
        &batch_bytes,
        &bytes(conn, single.key()).await,
        "{:?}: the two keys' bytes differ",
        engine
    );

    // No false negatives, batched or one by one, on either key.
    for bloom in [&batch, &single] {
        let found = bloom.exists_many(items).await.unwrap();
        prop_assert!(
            found.iter().all(|f| *f),
            "{:?}: exists_many misses an added item: {:?}",
            engine,
            found
        );
        for item in items {
            prop_assert!(
                bloom.exists(item).await.unwrap(),
                "{:?}: exists misses {:?}",
                engine,
                item
            );
        }
    }
    // The first occurrence of an item in an empty filter is new unless all its bits were set
    // by earlier items; a later repeat never is.
    for (i, item) in items.iter().enumerate() {
        if items[..i].contains(item) {
            prop_assert!(!batch_flags[i], "a repeat of {:?} reported new", item);
        }
    }
    prop_assert_eq!(batch_flags.first().copied(), items.first().map(|_| true));
    Ok(batch_bytes)
}

#[test]
fn add_many_matches_one_add_per_item() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let redis = runtime.block_on(common::redis());
    let conn = runtime.block_on(redis.connection());

    let config = Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    runner
        .run(&(sizes(), batches()), |(bits, items)| {
            let mut conn = conn.clone();
            runtime.block_on(async move {
                let fast = check(&mut conn, Engine::Fast, bits, &items).await?;
                let scripts = check(&mut conn, Engine::Scripts, bits, &items).await?;
                prop_assert_eq!(fast, scripts, "the engines wrote different bytes");
                Ok(())
            })
        })
        .unwrap();
}
