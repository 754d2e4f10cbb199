//! The module kind (SPEC.md §7): filters that are the server's own `BF.*` Bloom filters, against
//! a private `redis-server` with RedisBloom loaded (tests/common/module.rs).

mod common;

use common::module::redis_with_bloom;

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
