//! `add_many`/`exists_many` give exactly what `add`/`exists` give item by item, bytes included.

mod common;

use redbloom::RedisBloom;

/// Empty item, duplicates inside the batch (adjacent and far apart), non-UTF-8 bytes, long items.
fn mixed_items() -> Vec<Vec<u8>> {
    let mut items: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"hello".to_vec(),
        b"hello".to_vec(),
        b"world".to_vec(),
        vec![0xff, 0xfe, 0x00, 0x80],
        vec![0, 1, 2],
        b"".to_vec(),
        "h\u{e9}llo w\u{f6}rld \u{1f600}".as_bytes().to_vec(),
        vec![0xc3, 0x28], // invalid UTF-8 sequence
        vec![0xff; 40],
        b"user:10086".to_vec(),
        vec![0xff, 0xfe, 0x00, 0x80],
    ];
    items.extend((0..40).map(|i| format!("item:{i}").into_bytes()));
    items.push(b"hello".to_vec());
    items.push(vec![0xc3, 0x28]);
    items
}

#[tokio::test]
async fn add_many_equals_add_item_by_item() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let items = mixed_items();
    // 64 bits saturates within the batch (many `false` without duplicates: false positives
    // at insertion), the larger sizes leave almost every distinct item new.
    for bits in [64u64, 1_000, 20_000, 1 << 20] {
        let single = RedisBloom::new(conn.clone(), common::unique_key("single"), bits).unwrap();
        let batch = RedisBloom::new(conn.clone(), common::unique_key("batch"), bits).unwrap();

        let mut want = Vec::with_capacity(items.len());
        for item in &items {
            want.push(single.add(item).await.unwrap());
        }
        let got = batch.add_many(&items).await.unwrap();
        assert_eq!(got, want, "{bits} bits");

        // Not vacuous: the first item is new, a repeated item is not.
        assert!(want[0], "first item new with {bits} bits");
        assert!(!want[2], "duplicate \"hello\" not new with {bits} bits");
        assert!(!want[6], "duplicate empty item not new with {bits} bits");

        let single_hex = common::key_hex(&mut conn, single.key()).await;
        assert!(!single_hex.is_empty());
        assert_eq!(
            common::key_hex(&mut conn, batch.key()).await,
            single_hex,
            "{bits} bits"
        );

        // Adding the whole batch again: nothing is new, by either path.
        assert!(batch.add_many(&items).await.unwrap().iter().all(|n| !n));
        for item in &items {
            assert!(!single.add(item).await.unwrap());
        }
    }
}

#[tokio::test]
async fn exists_many_equals_exists_item_by_item() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let items = mixed_items();
    for bits in [64u64, 2_000, 1 << 20] {
        let bloom = RedisBloom::new(conn.clone(), common::unique_key("exists"), bits).unwrap();
        // Add every other item; the rest, plus some never-seen items, are probes.
        let added: Vec<&Vec<u8>> = items.iter().step_by(2).collect();
        bloom.add_many(&added).await.unwrap();
        let mut probes = items.clone();
        probes.extend((0..40).map(|i| format!("never:{i}").into_bytes()));
        probes.push(vec![0x80; 3]);

        let got = bloom.exists_many(&probes).await.unwrap();
        let mut want = Vec::with_capacity(probes.len());
        for probe in &probes {
            want.push(bloom.exists(probe).await.unwrap());
        }
        assert_eq!(got, want, "{bits} bits");

        // Every added item is present.
        for (i, present) in got.iter().enumerate().step_by(2).take(added.len()) {
            assert!(present, "added item {i} missing with {bits} bits");
        }
        if bits >= 2_000 {
            // With room to spare, some probes are absent: the comparison covers both answers.
            assert!(got.iter().any(|p| !p), "no absent probe with {bits} bits");
        }
    }
}

#[tokio::test]
async fn exists_many_on_missing_key_is_all_false() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let bloom = RedisBloom::new(conn, common::unique_key("missing"), 1_000).unwrap();
    let items = mixed_items();
    let got = bloom.exists_many(&items).await.unwrap();
    assert_eq!(got, vec![false; items.len()]);
    for item in &items {
        assert!(!bloom.exists(item).await.unwrap());
    }
}

#[tokio::test]
async fn empty_slices_give_empty_vectors() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("empty");
    let bloom = RedisBloom::new(conn.clone(), &key, 1_000).unwrap();

    let none: &[&str] = &[];
    assert_eq!(bloom.add_many(none).await.unwrap(), Vec::<bool>::new());
    assert_eq!(bloom.exists_many(none).await.unwrap(), Vec::<bool>::new());
    let none_bytes: Vec<Vec<u8>> = Vec::new();
    assert!(bloom.add_many(&none_bytes).await.unwrap().is_empty());
    assert!(bloom.exists_many(&none_bytes).await.unwrap().is_empty());
    // Nothing was written: the key still does not exist.
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0);

    // And on an existing filter, empty batches leave it unchanged.
    bloom.add("x").await.unwrap();
    let before = common::key_hex(&mut conn, &key).await;
    assert!(bloom.add_many(none).await.unwrap().is_empty());
    assert!(bloom.exists_many(none).await.unwrap().is_empty());
    assert_eq!(common::key_hex(&mut conn, &key).await, before);
}
