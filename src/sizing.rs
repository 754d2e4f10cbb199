//! Sizing math (SPEC.md §2): bits for a target false-positive rate, and what a filter's set
//! bits say about it. Pure functions; the formulas are the standard ones, see
//! <https://en.wikipedia.org/wiki/Bloom_filter#Probability_of_false_positives> and, for the item
//! estimate, Swamidass & Baldi (2007), "Mathematical correction for fingerprint similarity
//! measures to improve chemical retrieval".

use crate::error::{Error, Result};

/// The largest filter one Redis string holds: 2^32 bits (512 MiB); offsets go up to 2^32 - 1.
pub const MAX_BITS: u64 = 1 << 32;

/// Bits for `items` items at false-positive rate `fpr` with a fixed number of hashes `k`
/// (the go-zero layout uses k = 14): `ceil(-k·n / ln(1 - p^(1/k)))`.
///
/// ```
/// // go-zero's rule of thumb: 20 bits per item gives about 6.7e-5 with k = 14.
/// let bits = redbloom::bits_for_fixed_k(1_000, 6.7e-5, 14)?;
/// assert!((19_900..=20_100).contains(&bits));
/// # Ok::<(), redbloom::Error>(())
/// ```
///
/// # Errors
/// [`Error::InvalidConfig`] when `items` or `hashes` is 0, `fpr` is not in (0, 1), or the
/// result does not fit in a `u64`.
pub fn bits_for_fixed_k(items: u64, fpr: f64, hashes: u32) -> Result<u64> {
    check_items_and_rate(items, fpr)?;
    if hashes == 0 {
        return Err(Error::InvalidConfig(
            "the number of hashes must be at least 1".into(),
        ));
    }
    let k = f64::from(hashes);
    // 1 - p^(1/k), computed without cancellation when p^(1/k) is close to 1.
    let miss = -(fpr.ln() / k).exp_m1();
    to_bits(-k * items as f64 / miss.ln())
}

/// The false-positive rate expected after `items` items in a filter of `bits` bits and `hashes`
/// hashes: `(1 - e^(-k·n/m))^k`.
///
/// ```
/// let p = redbloom::expected_fpr(1_000, 20_000, 14);
/// assert!((p - 6.7e-5).abs() < 0.1e-5);
/// ```
pub fn expected_fpr(items: u64, bits: u64, hashes: u32) -> f64 {
    let k = f64::from(hashes);
    (-(-k * items as f64 / bits as f64).exp_m1()).powf(k)
}

/// Bits for `items` items at rate `fpr` when the number of hashes is free to choose:
/// `ceil(-n·ln p / (ln 2)^2)`.
///
/// ```
/// assert_eq!(redbloom::optimal_bits(1_000_000, 0.01)?, 9_585_059);
/// # Ok::<(), redbloom::Error>(())
/// ```
///
/// # Errors
/// [`Error::InvalidConfig`] when `items` is 0, `fpr` is not in (0, 1), or the result does not
/// fit in a `u64`.
pub fn optimal_bits(items: u64, fpr: f64) -> Result<u64> {
    check_items_and_rate(items, fpr)?;
    let ln2 = std::f64::consts::LN_2;
    to_bits(-(items as f64) * fpr.ln() / (ln2 * ln2))
}

/// The number of hashes that minimises the false-positive rate for `bits` bits and `items`
/// items: `max(1, round(m/n · ln 2))`. Returns 1 when `items` is 0.
///
/// ```
/// assert_eq!(redbloom::optimal_hashes(9_585_059, 1_000_000), 7);
/// ```
pub fn optimal_hashes(bits: u64, items: u64) -> u32 {
    if items == 0 {
        return 1;
    }
    let k = (bits as f64 / items as f64 * std::f64::consts::LN_2).round();
    k.clamp(1.0, f64::from(u32::MAX)) as u32
}

/// The false-positive rate each generation of a window filter is sized for, so that a check,
/// which tests every live generation, stays at or below `fpr` as long as no window holds more
/// than the filter's capacity: `1 - sqrt(1 - fpr)`, about `fpr / 2`.
///
/// Why two: any G - 1 consecutive generations span exactly one window, so they hold at most
/// the capacity together; the G live generations are the G - 1 oldest and the current one, so
/// at most two of them can be full at once (the oldest and the current), and a generation's
/// rate grows faster than its fill, so two full generations and the rest empty is the worst
/// case: `1 - (1 - p_g)^2 = fpr`.
///
/// ```
/// let p = redbloom::window_generation_fpr(0.01);
/// assert!((p - 0.005013).abs() < 1e-6);
/// ```
pub fn window_generation_fpr(fpr: f64) -> f64 {
    -(0.5 * (-fpr).ln_1p()).exp_m1()
}

/// The false-positive rate level `level` (from 0) of a growing filter is sized for, so that
/// the whole filter's rate stays below `fpr` however many levels it has: `fpr·(1−r)·r^level`
/// (r the tightening ratio). The levels' rates sum to `fpr·(1 − r^L) < fpr`, and a check's
/// false-positive rate is at most that sum.
///
/// ```
/// let p0 = redbloom::growing_level_fpr(0.01, 0.8, 0);
/// assert!((p0 - 0.002).abs() < 1e-12);
/// let all: f64 = (0..64).map(|i| redbloom::growing_level_fpr(0.01, 0.8, i)).sum();
/// assert!(all < 0.01);
/// ```
pub fn growing_level_fpr(fpr: f64, tightening: f64, level: u32) -> f64 {
    fpr * (1.0 - tightening) * tightening.powi(level as i32)
}

/// How many distinct items a filter holds, estimated from its number of set bits
/// (Swamidass–Baldi): `-(m/k)·ln(1 - X/m)`. Infinite when every bit is set.
///
/// ```
/// let n = redbloom::estimate_items(20_000, 14, 10_066);
/// assert!((n - 1_000.0).abs() < 10.0);
/// ```
pub fn estimate_items(bits: u64, hashes: u32, bits_set: u64) -> f64 {
    let m = bits as f64;
    let fill = bits_set.min(bits) as f64 / m;
    -(m / f64::from(hashes)) * (-fill).ln_1p()
}

/// The false-positive rate a filter has now, from its number of set bits: `(X/m)^k`.
///
/// ```
/// assert_eq!(redbloom::current_fpr(100, 2, 50), 0.25);
/// ```
pub fn current_fpr(bits: u64, hashes: u32, bits_set: u64) -> f64 {
    (bits_set.min(bits) as f64 / bits as f64).powf(f64::from(hashes))
}

/// A filter's size in bits (all shards together) and bits per item, from what a builder was
/// given: `bits` (and `hashes` where the layout's k is not fixed), or `items` and `fpr` sized at
/// the rate `rate(fpr)` (a window's generation is sized at about half the rate given).
///
/// # Errors
/// [`Error::InvalidConfig`] when neither or both sizes are given, or they are invalid, or
/// they need more than `shards` keys of 2^32 bits.
pub(crate) fn for_builder(
    bits: Option<u64>,
    items: Option<u64>,
    fpr: Option<f64>,
    hashes: Option<u32>,
    shards: u32,
    layout: crate::layout::Layout,
    rate: impl Fn(f64) -> f64,
) -> Result<(u64, u32)> {
    let shards = shards.max(1);
    let fixed = layout.fixed_hashes();
    let (bits, hashes) = match (bits, items, fpr) {
        (Some(bits), None, None) => match hashes.or(fixed) {
            Some(k) => (bits, k),
            None => {
                return Err(Error::InvalidConfig(
                    "the native layout sized in bits needs the number of hashes too".into(),
                ))
            }
        },
        (None, Some(items), Some(fpr)) => {
            let fpr = match fpr > 0.0 && fpr < 1.0 {
                true => rate(fpr),
                false => fpr,
            };
            check_items_and_rate(items, fpr)?;
            let bits = match fixed {
                Some(k) => bits_for_fixed_k(items, fpr, k),
                None => optimal_bits(items, fpr),
            };
            // Past 2^64 bits too: the same limit, said the same way.
            let fits = bits
                .ok()
                .filter(|b| b.div_ceil(u64::from(shards)) <= MAX_BITS);
            let Some(bits) = fits else {
                return Err(too_many_items(
                    items,
                    fpr,
                    fixed,
                    shards,
                    (MAX_BITS, "bits"),
                ));
            };
            let k = hashes.or(fixed);
            (bits, k.unwrap_or_else(|| optimal_hashes(bits, items)))
        }
        (None, None, None) => {
            return Err(Error::InvalidConfig(
                "give the size in bits, or the expected items and a false-positive rate".into(),
            ))
        }
        (None, Some(_), None) | (None, None, Some(_)) => {
            return Err(Error::InvalidConfig(
                "expected items and a false-positive rate go together".into(),
            ))
        }
        (Some(_), _, _) => {
            return Err(Error::InvalidConfig(
                "give the size in bits or the expected items with a rate, not both".into(),
            ))
        }
    };
    let bits_per_shard = bits.div_ceil(u64::from(shards));
    if shards > 1 && !(1..=MAX_BITS).contains(&bits_per_shard) {
        return Err(Error::InvalidConfig(format!(
            "{bits} bits over {shards} shards is more than 2^32 bits per shard"
        )));
    }
    Ok((bits, hashes))
}

/// The most shards a filter has ([`Builder::shards`](crate::Builder::shards)).
const MAX_SHARDS: u32 = 1024;

/// The error for `items` items at rate `fpr` (`fixed` hashes, or the best number) that need
/// more `unit`s (bits, or a counting filter's counters) than `shards` keys of `per_key` (2^32
/// bits, 2^30 counters) hold: it says the most items that fit at that rate, in these shards
/// and in the most shards.
pub(crate) fn too_many_items(
    items: u64,
    fpr: f64,
    fixed: Option<u32>,
    shards: u32,
    (per_key, unit): (u64, &str),
) -> Error {
    let per_item = match fixed {
        Some(k) => -f64::from(k) / (-(fpr.ln() / f64::from(k)).exp_m1()).ln(),
        None => -fpr.ln() / (std::f64::consts::LN_2 * std::f64::consts::LN_2),
    };
    let most = |shards: u32| (f64::from(shards) * per_key as f64 / per_item).floor() as u64;
    let more = match shards < MAX_SHARDS {
        true => format!(
            "; more shards hold more ({} in {MAX_SHARDS} shards)",
            most(MAX_SHARDS)
        ),
        false => String::new(),
    };
    let key = match per_key.trailing_zeros() {
        32 => "2^32 bits".to_owned(),
        n => format!("2^{n} {unit}"),
    };
    Error::InvalidConfig(format!(
        "{items} items at a false-positive rate of {fpr} need {:.3e} {unit}, more than {shards} \
         key(s) of {key} hold: at most {} items fit at that rate in {shards} shard(s){more}",
        items as f64 * per_item,
        most(shards),
    ))
}

/// `Ok` for at least one item and a rate in (0, 1).
///
/// # Errors
/// [`Error::InvalidConfig`] naming what is out of range.
pub(crate) fn check_items_and_rate(items: u64, fpr: f64) -> Result<()> {
    if items == 0 {
        return Err(Error::InvalidConfig(
            "the expected number of items must be at least 1".into(),
        ));
    }
    between_0_and_1("the false-positive rate", fpr)
}

/// `Ok` for a `value` in (0, 1) (a rate, a ratio); else the error naming `what`.
///
/// # Errors
/// [`Error::InvalidConfig`].
pub(crate) fn between_0_and_1(what: &str, value: f64) -> Result<()> {
    match value > 0.0 && value < 1.0 {
        true => Ok(()),
        false => Err(Error::InvalidConfig(format!(
            "{what} must be between 0 and 1 (exclusive), not {value}"
        ))),
    }
}

fn to_bits(bits: f64) -> Result<u64> {
    let bits = bits.ceil();
    if bits.is_finite() && bits < u64::MAX as f64 {
        Ok(bits.max(1.0) as u64)
    } else {
        Err(Error::InvalidConfig(
            "the filter would need more than 2^64 bits".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_k_bits_meet_the_target_rate() {
        for (items, fpr) in [
            (1_000, 0.01),
            (1_000_000, 1e-3),
            (50_000_000, 1e-6),
            (1, 0.5),
        ] {
            let bits = bits_for_fixed_k(items, fpr, 14).unwrap();
            let rate = expected_fpr(items, bits, 14);
            assert!(
                rate <= fpr * (1.0 + 1e-9),
                "{items} items, {bits} bits: {rate} > {fpr}"
            );
            // SPEC.md §2 written naively: the result is its ceiling.
            let exact = -14.0 * items as f64 / (1.0 - fpr.powf(1.0 / 14.0)).ln();
            assert!(
                bits as f64 >= exact && bits as f64 - exact < 1.0 + exact * 1e-12,
                "{exact}"
            );
        }
    }

    #[test]
    fn gozero_rule_of_thumb() {
        // SPEC.md §1: k = 14 with 20 bits per item gives about 6.7e-5.
        let rate = expected_fpr(1_000_000, 20_000_000, 14);
        assert!((rate - 6.7e-5).abs() < 0.05e-5, "{rate}");
    }

    #[test]
    fn free_k_sizing() {
        // 1e9 items at 1e-6: about 28.76 bits per item (the issue's "~29"), k = 20.
        let bits = optimal_bits(1_000_000_000, 1e-6).unwrap();
        assert_eq!(bits, 28_755_175_133);
        assert_eq!(optimal_hashes(bits, 1_000_000_000), 20);
        // 1% needs 9.585 bits per item and k = 7, and meets its target.
        let bits = optimal_bits(1_000_000, 0.01).unwrap();
        assert_eq!(optimal_hashes(bits, 1_000_000), 7);
        assert!(expected_fpr(1_000_000, bits, 7) < 0.0101);
        assert_eq!(optimal_hashes(1, 1_000_000), 1);
    }

    #[test]
    fn estimates_invert_the_fill_formula() {
        let (bits, k) = (1_000_000u64, 14);
        for items in [0u64, 1, 1_000, 50_000] {
            // Expected set bits after n items: m(1 - e^(-kn/m)).
            let set = (bits as f64 * -(-(k as f64) * items as f64 / bits as f64).exp_m1()).round();
            let n = estimate_items(bits, k, set as u64);
            assert!(
                (n - items as f64).abs() <= 1.0 + items as f64 * 1e-4,
                "{items} vs {n}"
            );
        }
        assert!(estimate_items(64, 14, 64).is_infinite());
        assert_eq!(current_fpr(64, 14, 0), 0.0);
        assert_eq!(current_fpr(64, 14, 64), 1.0);
        assert_eq!(
            current_fpr(64, 14, 1000),
            1.0,
            "more set bits than bits is clamped"
        );
    }

    #[test]
    fn bad_inputs_are_errors_not_panics() {
        for (items, fpr) in [(0, 0.01), (10, 0.0), (10, 1.0), (10, -1.0), (10, f64::NAN)] {
            assert!(matches!(
                bits_for_fixed_k(items, fpr, 14),
                Err(Error::InvalidConfig(_))
            ));
            assert!(matches!(
                optimal_bits(items, fpr),
                Err(Error::InvalidConfig(_))
            ));
        }
        assert!(matches!(
            bits_for_fixed_k(10, 0.01, 0),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            optimal_bits(u64::MAX, 1e-300),
            Err(Error::InvalidConfig(_))
        ));
        assert_eq!(optimal_hashes(100, 0), 1);
    }
}
