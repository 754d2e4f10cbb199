//! The measured false-positive rate after n items matches `expected_fpr(n, bits, 14)` (SPEC §2).

mod common;

use redbloom::RedisBloom;

const ITEMS: u64 = 100_000;
const PROBES: u64 = 100_000;
const BATCH: usize = 1_000;

/// Fills `bloom` with `present:0..ITEMS`, checks `absent:0..PROBES` (never added) and returns how
/// many of those were reported present.
async fn false_positives(bloom: &RedisBloom<redis::aio::MultiplexedConnection>) -> u64 {
    let present: Vec<String> = (0..ITEMS).map(|i| format!("present:{i}")).collect();
    for chunk in present.chunks(BATCH) {
        bloom.add_many(chunk).await.unwrap();
    }
    // Sanity: the fill is real (no false negatives among what was added).
    let sample: Vec<&String> = present.iter().step_by(100).collect();
    assert!(bloom
        .exists_many(&sample)
        .await
        .unwrap()
        .into_iter()
        .all(|p| p));

    let absent: Vec<String> = (0..PROBES).map(|i| format!("absent:{i}")).collect();
    let mut hits = 0;
    for chunk in absent.chunks(BATCH) {
        hits += bloom
            .exists_many(chunk)
            .await
            .unwrap()
            .into_iter()
            .filter(|&p| p)
            .count() as u64;
    }
    hits
}

/// Asserts that `hits` false positives out of `PROBES` agree with the rate `p`.
///
/// Tolerance: each absent probe is (to a very good approximation) an independent Bernoulli trial
/// with success probability p, so the count of hits is Binomial(N, p) with mean N·p and standard
/// deviation σ = sqrt(N·p·(1-p)). A correct filter lands within 4σ of the mean with probability
/// above 99.99%. The formula (1 - e^(-kn/m))^k is itself an approximation (it treats the fill of
/// the filter as its expectation and ignores the k locations of one item colliding), and the
/// actual fill of one filter varies a little around its expectation: the set bits' σ is ~500-700
/// of ~10^6, about 0.07%, which the power k = 14 turns into about 1% of the rate. A relative
/// slack of 5% of the mean on top of 4σ covers these generously. The items are fixed
/// strings, so the outcome is deterministic; the tolerance only says what "agrees" means.
///
/// What it catches, for the 1% filter (mean 1000, tolerance about ±176): a filter that really
/// uses fewer bits than it claims (90% of them doubles the rate to ~2%), a wrong k by two or more
/// (k = 12 or 16), a check that says "present" too easily or never, or a sizing that misses its
/// target. (k off by one moves the rate by ~15%, about at the edge of this tolerance: the exact
/// bytes are pinned by tests/gozero_bytes.rs instead.)
fn assert_rate_agrees(label: &str, hits: u64, p: f64) {
    let n = PROBES as f64;
    let mean = n * p;
    let sigma = (n * p * (1.0 - p)).sqrt();
    let tolerance = 4.0 * sigma + 0.05 * mean;
    let measured = hits as f64 / n;
    eprintln!(
        "{label}: {hits} false positives in {PROBES} probes: rate {measured:.6}, expected {p:.6} \
         (mean {mean:.1}, tolerance ±{tolerance:.1})"
    );
    assert!(
        (hits as f64 - mean).abs() <= tolerance,
        "{label}: {hits} false positives in {PROBES} (rate {measured}), expected {mean:.1} ± \
         {tolerance:.1} (rate {p})"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn one_percent_target_is_met() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let bloom = RedisBloom::builder(common::unique_key("fpr-1pct"))
        .expected_items(ITEMS)
        .false_positive_rate(0.01)
        .build(conn)
        .unwrap();
    let p = redbloom::expected_fpr(ITEMS, bloom.bits(), 14);
    // The builder sizes for the target: the formula's rate at n items is at most 1% and close.
    assert!(p <= 0.01 * (1.0 + 1e-9) && p > 0.0099, "{p}");

    let hits = false_positives(&bloom).await;
    assert_rate_agrees("1% target", hits, p);
}

#[tokio::test(flavor = "multi_thread")]
async fn gozero_twenty_bits_per_item() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let bits = 20 * ITEMS;
    let bloom = RedisBloom::new(conn, common::unique_key("fpr-20bits"), bits).unwrap();
    let p = redbloom::expected_fpr(ITEMS, bits, 14);
    // SPEC §1: about 6.7e-5.
    assert!((p - 6.7e-5).abs() < 0.1e-5, "{p}");

    // Mean 6.7 hits, σ ≈ 2.6: the bound is about 0..=17. The lower side cannot fail here, the
    // upper side catches any filter much weaker than go-zero's (e.g. a quarter of the bits used).
    let hits = false_positives(&bloom).await;
    assert_rate_agrees("20 bits per item", hits, p);
}
