//! Window filters whose generations pass 4 MiB (issue 24): large batches go by ranges of the
//! generations instead of a script per item, with the same answers and bytes as small
//! batches; items in an older generation are not new; a batch pinned to an epoch that passes
//! goes again into the current generation and loses nothing; checks by ranges answer as
//! single checks do.

mod common;

use common::keys_like;
use redbloom::WindowBloom;
use redis::aio::MultiplexedConnection;
use std::time::Duration;

/// A window filter of `capacity` items at 0.001 (3,000,000: generations of about 6.5 MB).
fn window(
    conn: &MultiplexedConnection,
    key: &str,
    window: Duration,
    capacity: u64,
) -> WindowBloom<MultiplexedConnection> {
    WindowBloom::builder(key, window)
        .expected_items(capacity)
        .false_positive_rate(0.001)
        .build(conn.clone())
        .unwrap()
}

/// The filter's generations: (epoch, bytes), by epoch.
async fn generations(conn: &mut MultiplexedConnection, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut all = Vec::new();
    for gen in keys_like(conn, &format!("{}*", common::companion(key, "gen:"))).await {
        let Ok(epoch) = gen.rsplit(':').next().unwrap().parse::<i64>() else {
            continue;
        };
        let bytes: Vec<u8> = redis::cmd("GET").arg(&gen).query_async(conn).await.unwrap();
        all.push((epoch, bytes));
    }
    all.sort();
    all
}

fn items(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i}")).collect()
}

/// Within one generation (of 20 minutes), a batch by ranges answers "new" as batches of 500
/// (the per-item script) do, and leaves the same bytes; the second batch overlaps the first.
#[tokio::test]
async fn ranges_match_small_batches() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let (big_key, small_key) = (
        common::unique_key("window-ranges"),
        common::unique_key("window-ranges-small"),
    );
    let (big, small) = (
        window(&conn, &big_key, Duration::from_secs(3600), 3_000_000),
        window(&conn, &small_key, Duration::from_secs(3600), 3_000_000),
    );
    assert!(
        big.bits() / 8 > 4 << 20,
        "generations past 4 MiB: {}",
        big.bits()
    );
    // Duplicates inside the first batch; the second holds half of the first's items.
    let first: Vec<String> = (0..40_000).map(|i| format!("x{}", i % 35_000)).collect();
    let second = items("x", 17_500..57_500);
    let setranges = common::calls(&mut conn, "setrange").await;
    // Both rounds within one generation, or both again.
    let rounds: [&[String]; 2] = [&first, &second];
    let runs = common::big_and_small_rounds(&conn, (&big, &small), &rounds, 500).await;
    for (round, (by_ranges, small_batches)) in runs.iter().enumerate() {
        assert!(
            by_ranges == small_batches,
            "round {round}: new flags differ"
        );
        let new = by_ranges.iter().filter(|&&n| n).count();
        let expected = [35_000, 22_500][round];
        assert!(
            new <= expected && new * 100 >= expected * 99,
            "{new} of {expected}"
        );
    }
    assert!(
        common::calls(&mut conn, "setrange").await > setranges + 10,
        "the big batches went by ranges"
    );
    let (b, s) = (
        generations(&mut conn, &big_key).await,
        generations(&mut conn, &small_key).await,
    );
    assert!(!b.is_empty() && b == s, "the generations' bytes differ");
    assert!(keys_like(
        &mut conn,
        &format!("{}*", common::companion(&big_key, "scratch"))
    )
    .await
    .is_empty());
    let info = big.info().await.unwrap();
    assert!(
        info.parts
            .iter()
            .all(|p| matches!(p.ttl, redbloom::KeyTtl::Expires(_))),
        "every generation keeps its expiry: {info:?}"
    );
    big.clear().await.unwrap();
    small.clear().await.unwrap();
}

/// Generations of 1 s (a window of 3 s over 4): a batch by ranges after a generation change
/// finds the items of the older one (not new), and batches that cross a generation boundary
/// while their ranges go (pinned to an epoch that passes: they go again into the current one)
/// answer every distinct item new once and leave every item present.
#[tokio::test]
async fn ranges_see_older_generations_and_survive_a_boundary() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let w = Duration::from_secs(3);
    let key = common::unique_key("window-ranges-older");
    let recent = window(&conn, &key, w, 3_000_000);
    let old = items("old", 0..20_000);
    assert!(recent.add_many(&old).await.unwrap().iter().all(|&n| n));
    let at = common::server_ms(&mut conn).await / 1000;
    while common::server_ms(&mut conn).await / 1000 == at {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut both = items("young", 0..20_000);
    both.extend(old.iter().cloned());
    let new = recent.add_many(&both).await.unwrap();
    assert!(
        new[20_000..].iter().all(|&n| !n),
        "old items were in an older generation"
    );
    let young = new[..20_000].iter().filter(|&&n| n).count();
    assert!(young >= 19_950, "{young} of 20000 young items new");
    assert!(recent.exists_many(&both).await.unwrap().iter().all(|&p| p));
    recent.clear().await.unwrap();

    // Generations of 1 s and small ranges (4 KiB: about 1,600 per generation), each batch
    // started a little before a boundary, make a batch's ranges cross it now and then; each
    // round is a new filter.
    let mut crossed = 0;
    // Before its first range a batch hashes its items and reads the older generations (a
    // debug build on a busy machine takes from tens of ms to over a second there, varying
    // with the tests beside it): the leads sweep the whole second in steps of 50 ms, twice
    // (the second time 25 ms apart from the first), so that some round's ranges meet the
    // boundary whatever that takes.
    for round in 0..40u64 {
        let key = common::unique_key("window-ranges-boundary");
        let pinned = WindowBloom::builder(&key, w)
            .expected_items(3_000_000)
            .false_positive_rate(0.001)
            .merge_chunk_bytes(4096)
            .build(conn.clone())
            .unwrap();
        let batch: Vec<String> = (0..60_000).map(|i| format!("b{}", i % 50_000)).collect();
        // Start a little before a boundary (the server's epochs are 1 s), by a lead that
        // varies from round to round.
        let lead = (60 + round * 50 + round / 20 * 25) % 1000;
        let now = common::server_ms(&mut conn).await;
        let next = (now / 1000 + 1) * 1000;
        let wait = (next - now).saturating_sub(lead);
        let wait = if wait < 50 { wait + 1000 } else { wait };
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let new = pinned.add_many(&batch).await.unwrap();
        assert_eq!(new.iter().filter(|&&n| n).count(), 50_000, "round {round}");
        assert!(
            new[50_000..].iter().all(|&n| !n),
            "round {round}: repeats are not new"
        );
        let found = pinned.exists_many(&batch[..50_000]).await.unwrap();
        assert!(
            found.iter().all(|&p| p),
            "round {round}: an item went missing"
        );
        let written = generations(&mut conn, &key).await;
        if written.len() > 1 {
            // Crossed: the batch went again into the newest generation, which holds every
            // item (so none leaves the window early with the older one).
            crossed += 1;
            let newest = &written.last().unwrap().1;
            for item in &batch[..1_000] {
                let bits = pinned.bits();
                let found =
                    redbloom::native_locations(item.as_bytes(), bits, pinned.hashes()).all(|o| {
                        newest
                            .get((o / 8) as usize)
                            .is_some_and(|b| b & (0x80 >> (o % 8)) != 0)
                    });
                assert!(
                    found,
                    "round {round}: {item} is not in the newest generation"
                );
            }
        }
        pinned.clear().await.unwrap();
        if crossed >= 1 {
            break;
        }
    }
    assert!(
        crossed >= 1,
        "no batch crossed a generation boundary: the test saw nothing"
    );
}

/// Checks of generations too large to read whole (over 64 MiB together: 10,000,000 items at
/// 0.001) go by ranges of each live generation, and answer as small batches do.
#[tokio::test]
async fn checks_by_ranges_match_small_checks() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("window-ranges-check");
    let recent = window(&conn, &key, Duration::from_secs(3600), 10_000_000);
    recent.add_many(&items("c", 0..30_000)).await.unwrap();
    let probes = items("c", 15_000..75_000);
    let getranges = common::calls(&mut conn, "getrange").await;
    let by_ranges = recent.exists_many(&probes).await.unwrap();
    assert!(
        common::calls(&mut conn, "getrange").await > getranges + 10,
        "the big check went by ranges"
    );
    let mut small = Vec::new();
    for chunk in probes.chunks(500) {
        small.extend(recent.exists_many(chunk).await.unwrap());
    }
    assert!(
        by_ranges == small,
        "checks by ranges differ from small checks"
    );
    assert!(by_ranges[..15_000].iter().all(|&p| p));
    recent.clear().await.unwrap();
}

/// Batches of 12,000 items into generations of about 6.5 MB go by ranges, adds and checks
/// alike (a generation's per-item scripts cost the server several times a plain filter's
/// `BITFIELD` per bit: priced as the plain filter's ranges, adds went by ranges only from about
/// 34,000 items here and checks from about 17,000), and answer as small batches do. On a server
/// of its own: the test counts the server's `SETRANGE`s and `GETRANGE`s.
#[tokio::test]
async fn mid_sized_batches_go_by_ranges() {
    let redis = common::module::redis_without_bloom();
    let mut conn = redis.connection().await;
    let (key, small_key) = (
        common::unique_key("window-mid"),
        common::unique_key("window-mid-small"),
    );
    let hour = Duration::from_secs(3600);
    let (mid, small) = (
        window(&conn, &key, hour, 3_000_000),
        window(&conn, &small_key, hour, 3_000_000),
    );
    let batch = &items("m", 0..12_000);
    let (mid, small, counted) = (&mid, &small, &conn);
    let ((added, merged), (found, read), small_added) = common::within_one_epoch(
        conn.clone(),
        common::generation_at(mid.window(), mid.generations()),
        || async move {
            let mut conn = counted.clone();
            let added = common::calls_during(&mut conn, "setrange", mid.add_many(batch)).await;
            let found = common::calls_during(&mut conn, "getrange", mid.exists_many(batch)).await;
            let mut small_added = Vec::new();
            for chunk in batch.chunks(500) {
                small_added.extend(small.add_many(chunk).await.unwrap());
            }
            (added, found, small_added)
        },
        || async move {
            mid.clear().await.unwrap();
            small.clear().await.unwrap();
        },
    )
    .await;
    let (added, found) = (added.unwrap(), found.unwrap());
    assert!(
        merged > 10,
        "the add of 12,000 went by ranges: {merged} SETRANGEs"
    );
    assert!(
        read > 10,
        "the check of 12,000 went by ranges: {read} GETRANGEs"
    );
    assert!(added == small_added, "new flags differ from small batches'");
    let new = added.iter().filter(|&&n| n).count();
    assert!(new * 100 >= 12_000 * 99, "{new} of 12,000 new");
    assert!(found.iter().all(|&f| f), "an added item not found");
    let (b, s) = (
        generations(&mut conn, &key).await,
        generations(&mut conn, &small_key).await,
    );
    assert!(!b.is_empty() && b == s, "the generations' bytes differ");
}
