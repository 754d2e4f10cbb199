//! The native layout: k from the rate, its false-positive rate, and the parameters stored beside
//! the bits (checked by every client, deleted and expired with the bits).

mod common;

use redbloom::{Engine, Error, Layout, RedisBloom};
use redis::aio::MultiplexedConnection;
use std::collections::HashMap;
use std::time::Duration;

type Bloom = RedisBloom<MultiplexedConnection>;

/// The params sidecar of a key without a hash tag.
fn params_key(key: &str) -> String {
    common::companion(key, "params")
}

fn native(key: &str, bits: u64, hashes: u32) -> redbloom::Builder<redbloom::kind::Plain> {
    RedisBloom::builder(key)
        .layout(Layout::Native)
        .bits(bits)
        .hashes(hashes)
}

/// The stored parameters (`field=value` pairs in one string) as a map; empty when missing.
async fn hgetall(conn: &mut MultiplexedConnection, key: &str) -> HashMap<String, String> {
    let stored: Option<String> = redis::cmd("GET").arg(key).query_async(conn).await.unwrap();
    stored
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|pair| pair.split_once('='))
        .map(|(f, v)| (f.to_owned(), v.to_owned()))
        .collect()
}

fn stored_params(bits: u64, hashes: u32) -> HashMap<String, String> {
    [
        ("layout", "native-v1".to_owned()),
        ("bits", bits.to_string()),
        ("hashes", hashes.to_string()),
        ("hash", "murmur3_x64_128".to_owned()),
    ]
    .into_iter()
    .map(|(f, v)| (f.to_owned(), v))
    .collect()
}

fn assert_mismatch<T: std::fmt::Debug>(op: &str, key: &str, result: redbloom::Result<T>) {
    match result {
        Err(Error::ParamsMismatch { key: got, .. }) => assert_eq!(got, key, "{op}"),
        other => panic!("{op}: expected Error::ParamsMismatch, got {other:?}"),
    }
}

/// Every operation of `bloom` fails with `ParamsMismatch` (a dense and a sparse batch each).
async fn assert_every_op_mismatches(bloom: &Bloom) {
    let key = bloom.key();
    let many: Vec<String> = (0..20_000).map(|i| format!("m:{i}")).collect();
    assert_mismatch("add", key, bloom.add("x").await);
    assert_mismatch("exists", key, bloom.exists("x").await);
    assert_mismatch("add_many", key, bloom.add_many(&["x", "y"]).await);
    assert_mismatch("add_many dense", key, bloom.add_many(&many).await);
    assert_mismatch("exists_many", key, bloom.exists_many(&["x", "y"]).await);
    assert_mismatch("exists_many dense", key, bloom.exists_many(&many).await);
    assert_mismatch("info", key, bloom.info().await);
    assert_mismatch("check_params", key, bloom.check_params().await);
}

/// Adds `n` items `NAME:added:i` in batches, checks all are found, and counts the false
/// positives among `probes` items `NAME:absent:i`.
async fn false_positives(bloom: &Bloom, name: &str, n: u64, probes: u64) -> u64 {
    const CHUNK: u64 = 10_000;
    for start in (0..n).step_by(CHUNK as usize) {
        let items: Vec<String> = (start..(start + CHUNK).min(n))
            .map(|i| format!("{name}:added:{i}"))
            .collect();
        bloom.add_many(&items).await.unwrap();
    }
    for start in (0..n).step_by(CHUNK as usize) {
        let items: Vec<String> = (start..(start + CHUNK).min(n))
            .map(|i| format!("{name}:added:{i}"))
            .collect();
        let found = bloom.exists_many(&items).await.unwrap();
        let missing = found.iter().filter(|&&p| !p).count();
        assert_eq!(missing, 0, "false negatives among items {start}..");
    }
    let mut positives = 0;
    for start in (0..probes).step_by(CHUNK as usize) {
        let items: Vec<String> = (start..(start + CHUNK).min(probes))
            .map(|i| format!("{name}:absent:{i}"))
            .collect();
        let found = bloom.exists_many(&items).await.unwrap();
        positives += found.iter().filter(|&&p| p).count() as u64;
    }
    positives
}

/// Builds the filter from items and rate, checks k and bits, fills it, and compares the
/// measured false-positive rate with `(1 - e^(-kn/m))^k` within 10%.
///
/// The false positives among `probes` absent items are binomial(probes, p): sigma =
/// sqrt(probes·p·(1-p)). At 1% with 100,000 probes: expected ~1,000, sigma ~31.5, and 10% of
/// the expectation (100) is ~3.2 sigma. At 0.1% the same 100,000 probes would expect ~100
/// with sigma ~10, so 10% would be 1 sigma: 1,000,000 probes restore ~1,000 expected, sigma
/// ~31.6, 10% ~3.2 sigma. The item names are fixed, so the count is the same on every run.
async fn measured_rate_matches_the_formula(fpr: f64, k: u32, probes: u64) {
    const N: u64 = 100_000;
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let key = common::unique_key("native-fpr");
    let bloom = RedisBloom::builder(&key)
        .layout(Layout::Native)
        .expected_items(N)
        .false_positive_rate(fpr)
        .build(conn)
        .unwrap();
    let bits = redbloom::optimal_bits(N, fpr).unwrap();
    assert_eq!(bloom.layout(), Layout::Native);
    assert_eq!(bloom.hashes(), k, "k for rate {fpr}");
    assert_eq!(bloom.bits(), bits, "bits for rate {fpr}");

    let expected = redbloom::expected_fpr(N, bits, k);
    let p = expected;
    let sigma = (probes as f64 * p * (1.0 - p)).sqrt();
    let band = 0.1 * probes as f64 * p;
    assert!(band > 3.0 * sigma, "10% band {band} vs sigma {sigma}");

    let positives = false_positives(&bloom, "native-fpr", N, probes).await;
    let measured = positives as f64 / probes as f64;
    println!("rate {fpr}, k {k}, {bits} bits: {positives} of {probes} = {measured}, formula {expected}, sigma {sigma}");
    assert!(
        (measured - expected).abs() <= 0.1 * expected,
        "rate {fpr}: measured {measured} ({positives} of {probes}), formula {expected}"
    );
}

#[tokio::test]
async fn one_percent_takes_k_7_and_meets_its_rate() {
    measured_rate_matches_the_formula(0.01, 7, 100_000).await;
}

#[tokio::test]
async fn a_tenth_of_a_percent_takes_k_10_and_meets_its_rate() {
    measured_rate_matches_the_formula(0.001, 10, 1_000_000).await;
}

#[tokio::test]
async fn parameters_are_stored_on_the_first_add() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("native-x");
    let bloom = native(&key, 10_000, 5).build(conn.clone()).unwrap();
    let params = params_key(&key);
    assert!(
        !common::key_exists(&mut conn, &params).await,
        "nothing before the first operation"
    );

    assert!(bloom.add("first").await.unwrap());
    assert_eq!(hgetall(&mut conn, &params).await, stored_params(10_000, 5));
    assert_eq!(
        common::key_hex(&mut conn, &key).await.len(),
        2 * (redbloom::native_locations(b"first", 10_000, 5)
            .max()
            .unwrap()
            / 8
            + 1) as usize
    );

    // check_params() stores them too, before anything is written.
    let key = common::unique_key("native-x");
    let bloom = native(&key, 64, 3).build(conn.clone()).unwrap();
    bloom.check_params().await.unwrap();
    assert_eq!(
        hgetall(&mut conn, &params_key(&key)).await,
        stored_params(64, 3)
    );
    // The bits are made with them, empty: they exist whenever the parameters do (a key gone
    // under stored parameters is lost data, SPEC.md §3).
    assert_eq!(
        common::key_hex(&mut conn, &key).await,
        "",
        "no bits set yet"
    );
    assert!(
        common::key_exists(&mut conn, &key).await,
        "the bits made with them"
    );
    // And a same-config client agrees.
    native(&key, 64, 3)
        .build(conn.clone())
        .unwrap()
        .check_params()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_different_configuration_is_refused_and_writes_nothing() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("native-x");
    let (bits, hashes) = (100_000, 7);
    let bloom = native(&key, bits, hashes).build(conn.clone()).unwrap();
    let items: Vec<String> = (0..500).map(|i| format!("item:{i}")).collect();
    bloom.add_many(&items).await.unwrap();
    let bytes = common::key_hex(&mut conn, &key).await;
    let params = hgetall(&mut conn, &params_key(&key)).await;
    assert_eq!(params, stored_params(bits, hashes));

    for (other_bits, other_hashes) in [(bits + 1, hashes), (bits / 2, hashes), (bits, hashes + 1)] {
        let other = native(&key, other_bits, other_hashes)
            .build(conn.clone())
            .unwrap();
        assert_every_op_mismatches(&other).await;
        let err = other.check_params().await.unwrap_err().to_string();
        assert!(
            err.contains(&format!("bits={bits}")) && err.contains(&format!("hashes={hashes}")),
            "{err}"
        );
        assert_eq!(
            common::key_hex(&mut conn, &key).await,
            bytes,
            "bits written"
        );
        assert_eq!(hgetall(&mut conn, &params_key(&key)).await, params);
    }

    // The original client still works, and its items are all there.
    assert!(bloom.exists_many(&items).await.unwrap().iter().all(|&p| p));
}

#[tokio::test]
async fn a_gozero_filter_is_not_taken_over() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("native-x");
    let bits = 100_000;
    // What go-zero itself writes: its set script over the item's offsets, and nothing else.
    let offsets = redbloom::gozero_locations(b"from-go", bits);
    common::gozero::set(&mut conn, &key, &offsets).await;
    let gozero = RedisBloom::new(conn.clone(), &key, bits).unwrap();
    let bytes = common::key_hex(&mut conn, &key).await;

    for hashes in [7, 14] {
        let bloom = native(&key, bits, hashes).build(conn.clone()).unwrap();
        assert_every_op_mismatches(&bloom).await;
        assert_eq!(common::key_hex(&mut conn, &key).await, bytes);
        assert!(
            !common::key_exists(&mut conn, &params_key(&key)).await,
            "params stored"
        );
    }
    assert!(gozero.exists("from-go").await.unwrap());
}

#[tokio::test]
async fn clear_deletes_both_keys_and_expire_sets_both_ttls() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("native-x");
    let params = params_key(&key);
    let bloom = native(&key, 10_000, 4).build(conn.clone()).unwrap();
    bloom.add("a").await.unwrap();

    assert!(bloom.expire(Duration::from_secs(100)).await.unwrap());
    for k in [&key, &params] {
        let ttl = common::pttl(&mut conn, k).await;
        assert!((99_000..=100_000).contains(&ttl), "PTTL of {k}: {ttl}");
    }

    assert!(bloom.clear().await.unwrap());
    assert!(!common::key_exists(&mut conn, &key).await);
    assert!(!common::key_exists(&mut conn, &params).await);
    assert!(!bloom.clear().await.unwrap(), "nothing left to delete");

    // Anew, with other parameters.
    let other = native(&key, 20_000, 6).build(conn.clone()).unwrap();
    assert!(other.add("a").await.unwrap());
    assert_eq!(hgetall(&mut conn, &params).await, stored_params(20_000, 6));
    assert_mismatch("old client after recreation", &key, {
        let fresh = native(&key, 10_000, 4).build(conn.clone()).unwrap();
        fresh.add("a").await
    });
}

#[tokio::test]
async fn the_same_client_stores_its_parameters_again_after_clear() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("native-x");
    let params = params_key(&key);
    let bloom = native(&key, 10_000, 4).build(conn.clone()).unwrap();
    bloom.add("a").await.unwrap();
    assert!(bloom.clear().await.unwrap());

    // Using the filter again recreates it whole, bits and parameters, so that another client
    // with the same configuration can open it.
    assert!(bloom.add("b").await.unwrap());
    let same = native(&key, 10_000, 4).build(conn.clone()).unwrap();
    let reopened = same.exists("b").await;
    let stored = hgetall(&mut conn, &params).await;
    assert!(
        matches!(reopened, Ok(true)),
        "a same-config client after clear() and add(): {reopened:?}; stored params: {stored:?}"
    );
    assert_eq!(stored, stored_params(10_000, 4));
}

#[tokio::test]
async fn the_same_client_stores_its_parameters_again_after_expiry() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("native-x");
    let bloom = native(&key, 10_000, 4).build(conn.clone()).unwrap();
    bloom.add("a").await.unwrap();
    assert!(bloom.expire(Duration::from_millis(50)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !common::key_exists(&mut conn, &key).await
            && !common::key_exists(&mut conn, &params_key(&key)).await
    );

    // A small batch (BITFIELD) and a dense one both bring the parameters back with the bits.
    assert!(bloom.add("b").await.unwrap());
    assert_eq!(
        hgetall(&mut conn, &params_key(&key)).await,
        stored_params(10_000, 4)
    );
    let batch: Vec<String> = (0..2_000).map(|i| format!("dense:{i}")).collect();
    bloom.add_many(&batch).await.unwrap();
    let same = native(&key, 10_000, 4).build(conn.clone()).unwrap();
    assert!(same.exists("b").await.unwrap());
    assert!(same.exists_many(&batch).await.unwrap().iter().all(|p| *p));

    // Another configuration that re-created the filter meanwhile is reported on the next write.
    assert!(bloom.clear().await.unwrap());
    let other = native(&key, 20_000, 4).build(conn.clone()).unwrap();
    other.add("c").await.unwrap();
    assert_mismatch("add after re-creation", &key, bloom.add("d").await);
    assert_mismatch(
        "add_many after re-creation",
        &key,
        bloom.add_many(&batch).await,
    );
}

#[tokio::test]
async fn a_hash_tagged_key_keeps_its_tag() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = format!("{{tenant}}:seen:{}", common::unique_key("tagged"));
    let bloom = native(&key, 10_000, 4).build(conn.clone()).unwrap();
    bloom.add("a").await.unwrap();
    let params = common::companion(&key, "params");
    assert!(params.starts_with("{tenant}:redbloom:"), "{params}");
    assert_eq!(hgetall(&mut conn, &params).await, stored_params(10_000, 4));
    // Not under the whole key as a tag, as for a key without one.
    let whole = format!("{{{key}}}:redbloom:{}:{key}:params", key.len());
    assert!(!common::key_exists(&mut conn, &whole).await);

    assert!(bloom.expire(Duration::from_secs(50)).await.unwrap());
    let ttl = common::pttl(&mut conn, &params).await;
    assert!((49_000..=50_000).contains(&ttl), "{ttl}");
    assert!(bloom.clear().await.unwrap());
    assert!(!common::key_exists(&mut conn, &params).await);
}

#[tokio::test]
async fn scripts_and_fast_write_the_same_native_bytes() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let (bits, hashes) = (50_000, 9);
    let items: Vec<Vec<u8>> = (0..3_000)
        .map(|i| format!("native:{}", i % 2_500).into_bytes())
        .chain([Vec::new(), vec![0xff, 0x00], b"native:7".to_vec()])
        .collect();
    let mut hexes = Vec::new();
    let mut flags = Vec::new();
    for engine in [Engine::Fast, Engine::Scripts] {
        let key = common::unique_key("native-x");
        let bloom = native(&key, bits, hashes)
            .engine(engine)
            .build(conn.clone())
            .unwrap();
        assert_eq!(bloom.engine(), engine);
        // Single adds, a small batch, then a large one (dense with Engine::Fast).
        let mut got = Vec::new();
        for item in &items[..20] {
            got.push(bloom.add(item).await.unwrap());
        }
        got.extend(bloom.add_many(&items[20..60]).await.unwrap());
        got.extend(bloom.add_many(&items[60..]).await.unwrap());
        let present = bloom.exists_many(&items).await.unwrap();
        assert!(present.iter().all(|&p| p), "{engine:?}");
        assert_eq!(
            hgetall(&mut conn, &params_key(&key)).await,
            stored_params(bits, hashes)
        );
        hexes.push(common::key_hex(&mut conn, &key).await);
        flags.push(got);
    }
    assert!(!hexes[0].is_empty());
    assert_eq!(hexes[0], hexes[1], "Fast and Scripts bytes");
    assert_eq!(flags[0], flags[1], "Fast and Scripts new flags");
    assert!(flags[0][0] && !flags[0][2_500 + 60], "a repeat is not new");

    // And the bytes are the native locations' SETBITs.
    let mut offsets: Vec<u64> = items
        .iter()
        .flat_map(|item| redbloom::native_locations(item, bits, hashes))
        .collect();
    offsets.sort_unstable();
    offsets.dedup();
    let mut want = vec![0u8; (offsets.last().unwrap() / 8 + 1) as usize];
    for o in offsets {
        want[(o / 8) as usize] |= 0x80 >> (o % 8);
    }
    let want: String = want.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hexes[0], want);
}
