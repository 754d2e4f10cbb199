//! The bytes in Redis are exactly go-zero's (SPEC.md §1).

mod common;

use redbloom::{Engine, RedisBloom};

#[tokio::test]
async fn hello_world_with_64_bits_gives_the_spec_bytes() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("hello-world");
    let bloom = RedisBloom::new(conn.clone(), &key, 64).unwrap();

    assert!(bloom.add("hello").await.unwrap());
    assert_eq!(common::key_hex(&mut conn, &key).await, "a0241940a00014");
    assert!(bloom.add("world").await.unwrap());
    assert_eq!(common::key_hex(&mut conn, &key).await, "a52c9b5aa00a14");
    assert!(
        !bloom.add("hello").await.unwrap(),
        "no bit flips the second time"
    );
}

#[tokio::test]
async fn every_write_path_matches_gozeros_own_script() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let items: Vec<Vec<u8>> = ["hello", "world", "", "user:10086"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .chain([vec![0u8, 1, 2], vec![0xff; 40]])
        .collect();
    for bits in [64u64, 1000, 20_000, 1 << 20] {
        // The filter go-zero would write: its set script fed the SPEC's locations.
        let gozero_key = common::unique_key("gozero");
        for item in &items {
            let offsets = redbloom::gozero_locations(item, bits);
            common::gozero::set(&mut conn, &gozero_key, &offsets).await;
        }
        let want = common::key_hex(&mut conn, &gozero_key).await;

        for engine in [Engine::Fast, Engine::Scripts] {
            let one_by_one = RedisBloom::new(conn.clone(), common::unique_key("single"), bits)
                .unwrap()
                .with_engine(engine);
            for item in &items {
                assert!(one_by_one.add(item).await.unwrap() || item.is_empty() || bits == 64);
            }
            let batched = RedisBloom::new(conn.clone(), common::unique_key("batch"), bits)
                .unwrap()
                .with_engine(engine);
            batched.add_many(&items).await.unwrap();

            let single = common::key_hex(&mut conn, one_by_one.key()).await;
            assert_eq!(single, want, "{engine:?} add, {bits} bits");
            let batch = common::key_hex(&mut conn, batched.key()).await;
            assert_eq!(batch, want, "{engine:?} add_many, {bits} bits");
            assert!(one_by_one
                .exists_many(&items)
                .await
                .unwrap()
                .iter()
                .all(|&b| b));
        }
    }
}

#[tokio::test]
async fn reads_a_filter_written_by_gozero() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("from-go");
    common::set_bytes(&mut conn, &key, &common::gozero::HELLO_WORLD_64_BITS).await;

    // Written by Go: no stored parameters, so writing into it takes the switch.
    let bloom = RedisBloom::builder(&key)
        .bits(64)
        .shared_with_go(true)
        .build(conn)
        .unwrap();
    assert!(bloom.exists("hello").await.unwrap());
    assert!(bloom.exists("world").await.unwrap());
    assert_eq!(
        bloom.exists_many(&["world", "hello"]).await.unwrap(),
        [true, true]
    );
    assert!(!bloom.add("hello").await.unwrap(), "already there");
}
