//! No false negatives: every one of 100,000 added items is found, by `exists_many` and `exists`.

mod common;

use redbloom::RedisBloom;

const ITEMS: usize = 100_000;
const BATCH: usize = 1_000;

fn item(i: usize) -> String {
    format!("found:{i}")
}

#[tokio::test(flavor = "multi_thread")]
async fn every_added_item_is_found() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let key = common::unique_key("all-found");
    let bloom = RedisBloom::builder(&key)
        .expected_items(ITEMS as u64)
        .false_positive_rate(0.01)
        .build(conn)
        .unwrap();
    assert_eq!(
        bloom.bits(),
        redbloom::bits_for_fixed_k(ITEMS as u64, 0.01, 14).unwrap()
    );

    let items: Vec<String> = (0..ITEMS).map(item).collect();

    // Before anything is added, the filter holds nothing: a check that `exists_many` can say no.
    let before = bloom.exists_many(&items[..BATCH]).await.unwrap();
    assert!(
        before.iter().all(|present| !present),
        "a missing key holds no items"
    );

    let mut new = 0usize;
    for chunk in items.chunks(BATCH) {
        let flags = bloom.add_many(chunk).await.unwrap();
        assert_eq!(flags.len(), chunk.len());
        new += flags.iter().filter(|&&f| f).count();
    }
    // Distinct items: all but the rare false positives at insertion time are new. At 1% final
    // rate the running rate averages well under 1%, so at least 99% must report new.
    assert!(
        new >= ITEMS * 99 / 100,
        "only {new} of {ITEMS} items were new"
    );

    let mut missing = Vec::new();
    for (c, chunk) in items.chunks(BATCH).enumerate() {
        let flags = bloom.exists_many(chunk).await.unwrap();
        assert_eq!(flags.len(), chunk.len());
        for (j, present) in flags.into_iter().enumerate() {
            if !present {
                missing.push(c * BATCH + j);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} false negatives from exists_many, first: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );

    // A sample of 1,000 spread across the whole range, one at a time.
    for i in (0..ITEMS).step_by(ITEMS / 1_000) {
        assert!(
            bloom.exists(item(i)).await.unwrap(),
            "exists({:?})",
            item(i)
        );
    }
}
