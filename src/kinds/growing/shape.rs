//! A growing filter's levels: how many items each takes at what rate, how many bits that
//! needs, where each level lies in Redis, and where an item's bits fall in it
//! (docs/design.md "Growing filters").
//!
//! Each level is a *word-blocked* Bloom filter: an item sets `per_word` bits in each of
//! `per_item` 64-bit words of the level, the words chosen independently. A check then reads
//! `per_item` words per level (`GET i64`, one 64-bit read each) instead of one bit per hash
//! function, and the levels share one Redis string (a *segment*) until it holds
//! [`SEGMENT_BYTES`], so that a single-item check of every level is one `BITFIELD_RO`. The
//! price is memory: blocks fill unevenly, so a level needs more bits for its rate than an
//! unblocked filter. Each level takes the fewest words per item whose price is at most
//! [`PENALTY`] (measured against the exact rate of an unblocked filter of the same size).

use crate::error::{Error, Result};
use crate::hash::ItemHash;
use crate::sizing::{growing_level_fpr, MAX_BITS};

/// Bits per word.
pub(super) const WORD: u64 = 64;

/// The most words an item uses in one level.
const MAX_WORDS_PER_ITEM: u32 = 8;

/// The most bits an item sets in one word (6 bits of a 64-bit mix name each).
const MAX_BITS_PER_WORD: u32 = 10;

/// The most memory a level may take over an unblocked filter of its rate before it uses one
/// more word per item (and one more 64-bit read per check).
const PENALTY: f64 = 1.2;

/// The levels share a Redis string up to this size: a dense add's merge rewrites a whole
/// segment (`BITOP`), so this bounds how long one merge holds the server. A level bigger than
/// this has a segment of its own.
pub(super) const SEGMENT_BYTES: u64 = crate::dense::MAX_BYTES;

/// One level's shape in one part (a shard's share of the filter).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Level {
    /// The level's number, from 0.
    pub(super) index: u32,
    /// The new items it takes.
    pub(super) capacity: u64,
    /// Its size in 64-bit words.
    pub(super) words: u64,
    /// Words an item uses.
    pub(super) per_item: u32,
    /// Bits an item sets in each of its words.
    pub(super) per_word: u32,
    /// The segment (Redis string) that holds it, and its first bit there.
    pub(super) segment: usize,
    pub(super) base: u64,
}

impl Level {
    /// Its size in bits.
    pub(super) fn bits(&self) -> u64 {
        self.words * WORD
    }

    /// The bits an item sets (some may coincide).
    pub(super) fn hashes(&self) -> u32 {
        self.per_item * self.per_word
    }

    /// Its false-positive rate once it holds `items` items.
    pub(super) fn fpr_with(&self, items: u64) -> f64 {
        match items {
            0 => 0.0,
            n => blocked_fpr(self.bits() as f64 / n as f64, self.per_word, self.per_item),
        }
    }

    /// The bit past its last one in its segment.
    pub(super) fn end(&self) -> u64 {
        self.base + self.bits()
    }

    /// Calls `f(offset, mask)` for each of the item's words: the word's first bit in the
    /// segment and the `per_word` distinct bits the item sets in it (bit t of the word, counted
    /// from the word's first bit as Redis counts them, is `1 << (63 - t)`: a `GET i64` reads
    /// the word so).
    pub(super) fn for_each_word(&self, hash: &ItemHash, mut f: impl FnMut(u64, u64)) {
        let (h1, h2) = seeds(hash);
        let salt = u64::from(self.index + 1).wrapping_mul(GOLDEN);
        for j in 0..u64::from(self.per_item) {
            let z = mix(h1.wrapping_add(salt) ^ mix(h2.wrapping_add(j.wrapping_mul(GOLDEN))));
            let word = ((u128::from(z) * u128::from(self.words)) >> 64) as u64;
            f(self.base + word * WORD, word_bits(z, self.per_word));
        }
    }

    /// Appends the item's bit offsets in its segment to `out`: exactly `hashes()` of them,
    /// word after word, each word's in increasing order.
    pub(super) fn push_offsets(&self, hash: &ItemHash, out: &mut Vec<u64>) {
        self.for_each_word(hash, |offset, mask| {
            let mut rest = mask;
            while rest != 0 {
                let t = rest.leading_zeros();
                out.push(offset + u64::from(t));
                rest &= !(1u64 << (63 - t));
            }
        });
    }
}

/// `count` distinct bits of a 64-bit word, drawn 6 bits at a time from a mix of `seed`.
fn word_bits(seed: u64, count: u32) -> u64 {
    let (mut pick, mut left, mut mask, mut taken) = (mix(seed ^ GOLDEN), 10, 0u64, 0);
    while taken < count {
        if left == 0 {
            pick = mix(pick ^ GOLDEN);
            left = 10;
        }
        let bit = 1u64 << (63 - (pick & 63));
        pick >>= 6;
        left -= 1;
        if mask & bit == 0 {
            mask |= bit;
            taken += 1;
        }
    }
    mask
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's finalizer: every input bit moves every output bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The two 64-bit seeds of an item's hash.
fn seeds(hash: &ItemHash) -> (u64, u64) {
    match *hash {
        ItemHash::Native(h1, h2) => (h1, h2),
        ItemHash::GoZero(hashes) => (hashes[0], hashes[1]),
    }
}

/// The false-positive rate of a word-blocked filter with `per_item` words of `per_word`
/// distinct bits per item, at `bits_per_item` bits of filter per item. A word's load (the
/// items that chose it) is Poisson with mean λ = 64·per_item/bits_per_item; given j items, the
/// chance that the `per_word` bits an absent item tests are all set is, by inclusion and
/// exclusion, Σ_i (−1)^i·C(per_word, i)·q_i^j, where q_i = C(64−i, per_word)/C(64, per_word)
/// is the chance that one item's bits miss i given bits; and E[q^j] = e^(−λ(1−q)) for a
/// Poisson j. An absent item's words are independent: the rate is the word's to the
/// `per_item`.
pub(super) fn blocked_fpr(bits_per_item: f64, per_word: u32, per_item: u32) -> f64 {
    let load = WORD as f64 * f64::from(per_item) / bits_per_item;
    let choose = |n: u32, k: u32| -> f64 {
        (0..k).fold(1.0, |c, i| c * f64::from(n - i) / f64::from(i + 1))
    };
    let all = choose(WORD as u32, per_word);
    let word: f64 = (0..=per_word)
        .map(|i| {
            let miss = choose(WORD as u32 - i, per_word) / all;
            let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
            sign * choose(per_word, i) * (-load * (1.0 - miss)).exp()
        })
        .sum();
    word.max(0.0).powi(per_item as i32)
}

/// The fewest bits per item at which [`blocked_fpr`] is at most `rate` (infinite when no
/// size reaches it).
fn bits_per_item(rate: f64, per_word: u32, per_item: u32) -> f64 {
    let (mut low, mut high) = (0.5f64, 4096.0f64);
    if blocked_fpr(high, per_word, per_item) > rate {
        return f64::INFINITY;
    }
    for _ in 0..48 {
        let mid = (low + high) / 2.0;
        match blocked_fpr(mid, per_word, per_item) <= rate {
            true => high = mid,
            false => low = mid,
        }
    }
    high
}

/// The words per item, bits per word and bits per item for a level at `rate`: the fewest
/// words whose bits per item are at most [`PENALTY`] times an unblocked filter's.
fn blocking(rate: f64) -> Option<(u32, u32, f64)> {
    let plain = -rate.ln() / (std::f64::consts::LN_2 * std::f64::consts::LN_2);
    let k = (-rate.log2()).ceil().max(1.0);
    let mut fallback: Option<(u32, u32, f64)> = None;
    for per_item in 1..=MAX_WORDS_PER_ITEM {
        let centre = (k / f64::from(per_item)).round() as u32;
        let low = centre.saturating_sub(2).clamp(1, MAX_BITS_PER_WORD);
        let high = (centre + 3).clamp(1, MAX_BITS_PER_WORD);
        let best = (low..=high)
            .map(|per_word| (per_item, per_word, bits_per_item(rate, per_word, per_item)))
            .min_by(|a, b| a.2.total_cmp(&b.2))?;
        if best.2 <= PENALTY * plain {
            return Some(best);
        }
        if best.2.is_finite() && fallback.is_none_or(|f| best.2 < f.2) {
            fallback = Some(best);
        }
    }
    fallback
}

/// Each level's shape for a part whose first level holds `capacity` items: level i holds
/// `capacity·growth^i` at `fpr·(1−r)·r^i`, up to `max_levels` levels and as long as a level
/// fits one key (2^32 bits); levels placed in segments of at most [`SEGMENT_BYTES`] (a
/// bigger level alone in its own).
pub(super) fn levels(
    capacity: u64,
    fpr: f64,
    growth: u32,
    tightening: f64,
    max_levels: u32,
) -> Result<Vec<Level>> {
    let mut levels: Vec<Level> = Vec::new();
    let mut items = capacity;
    let (mut segment, mut used) = (0usize, 0u64);
    for index in 0..max_levels {
        let rate = growing_level_fpr(fpr, tightening, index);
        let shape = blocking(rate).and_then(|(per_item, per_word, per)| {
            let words = ((items as f64 * per / WORD as f64).ceil() as u64).max(1);
            (words.checked_mul(WORD)? <= MAX_BITS).then_some((per_item, per_word, words))
        });
        let Some((per_item, per_word, words)) = shape else {
            if index > 0 {
                break;
            }
            // The most items a first level of one key's bits takes at that rate.
            let most = blocking(rate).map_or(0, |(_, _, per)| (MAX_BITS as f64 / per) as u64);
            return Err(Error::InvalidConfig(format!(
                "the first level of {capacity} items at {rate} needs more than one key's \
                 2^32 bits, which hold at most {most} items at that rate: use more shards, a \
                 smaller first level or a higher rate"
            )));
        };
        let bytes = words * WORD / 8;
        if used > 0 && used + bytes > SEGMENT_BYTES {
            segment += 1;
            used = 0;
        }
        levels.push(Level {
            index,
            capacity: items,
            words,
            per_item,
            per_word,
            segment,
            base: used * 8,
        });
        used += bytes;
        match items.checked_mul(u64::from(growth)) {
            Some(next) => items = next,
            None => break,
        }
    }
    Ok(levels)
}

/// A short digest of the levels' shapes, stored with the parameters: clients whose
/// floating-point arithmetic sized a level differently get a mismatch, not wrong answers.
pub(super) fn digest(levels: &[Level]) -> String {
    let text: String = levels
        .iter()
        .map(|l| {
            format!(
                "{}x{}x{}@{}+{};",
                l.per_item, l.per_word, l.words, l.segment, l.base
            )
        })
        .collect();
    let (h1, _) = crate::hash::murmur3_x64_128(text.as_bytes());
    format!("{:08x}", h1 >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_rate_matches_a_simulation() {
        // 20,000 items in a level sized for them at 0.2%: the measured rate of 200,000
        // absent items within 15% of the formula's (and at most the target).
        let level = levels(20_000, 0.01, 2, 0.8, 1).unwrap()[0];
        let mut bits = vec![0u64; level.words as usize];
        let hash = |i: u64| {
            let (h1, h2) = crate::hash::murmur3_x64_128(&i.to_be_bytes());
            ItemHash::Native(h1, h2)
        };
        for i in 0..20_000 {
            level.for_each_word(&hash(i), |offset, mask| {
                bits[(offset / 64) as usize] |= mask
            });
        }
        let mut positives = 0;
        for i in 1_000_000..1_200_000u64 {
            let mut all = true;
            level.for_each_word(&hash(i), |offset, mask| {
                all &= bits[(offset / 64) as usize] & mask == mask;
            });
            positives += u32::from(all);
        }
        let measured = f64::from(positives) / 200_000.0;
        let per = level.bits() as f64 / 20_000.0;
        let predicted = blocked_fpr(per, level.per_word, level.per_item);
        assert!(predicted <= 0.002, "{predicted}");
        assert!(
            (measured - predicted).abs() < 0.1 * predicted,
            "measured {measured}, predicted {predicted}"
        );
    }

    #[test]
    fn offsets_are_the_words_masks() {
        let level = levels(1_000, 0.01, 2, 0.8, 3).unwrap()[2];
        let hash = ItemHash::Native(12345, 67890);
        let mut offsets = Vec::new();
        level.push_offsets(&hash, &mut offsets);
        assert_eq!(offsets.len(), level.hashes() as usize);
        let mut from_words = Vec::new();
        level.for_each_word(&hash, |offset, mask| {
            assert_eq!(mask.count_ones(), level.per_word);
            from_words.extend(
                (0..64)
                    .filter(|t| mask & (1 << (63 - t)) != 0)
                    .map(|t| offset + t),
            );
        });
        assert_eq!(offsets, from_words);
        assert!(offsets.iter().all(|&o| o >= level.base && o < level.end()));
    }

    #[test]
    fn levels_grow_by_the_factor_at_tighter_rates_until_a_key_is_full() {
        let levels = levels(1_000, 0.01, 2, 0.8, 32).unwrap();
        assert_eq!(levels[0].capacity, 1_000);
        assert_eq!(levels[3].capacity, 8_000);
        let plain = |n: u64, p: f64| crate::sizing::optimal_bits(n, p).unwrap() as f64;
        for level in &levels {
            let rate = growing_level_fpr(0.01, 0.8, level.index);
            let per = level.bits() as f64 / level.capacity as f64;
            // Each level meets its own rate, at most PENALTY (and a word) over unblocked bits.
            assert!(blocked_fpr(per, level.per_word, level.per_item) <= rate);
            assert!(level.bits() as f64 <= PENALTY * plain(level.capacity, rate) + 64.0);
            assert!(level.bits() <= MAX_BITS);
        }
        // Levels share segments of at most SEGMENT_BYTES, in order, without gaps.
        for pair in levels.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            match a.segment == b.segment {
                true => assert_eq!(b.base, a.end()),
                false => assert_eq!((b.segment, b.base), (a.segment + 1, 0)),
            }
        }
        assert!(levels
            .iter()
            .all(|l| l.end() / 8 <= SEGMENT_BYTES || l.base == 0));
        // Cut where the next level would pass one key's 2^32 bits.
        assert!(levels.len() < 32);
        assert_eq!(
            super::levels(1_000, 0.01, 2, 0.8, 64).unwrap().len(),
            levels.len()
        );
        let sum: f64 = (0..levels.len() as u32)
            .map(|i| growing_level_fpr(0.01, 0.8, i))
            .sum();
        assert!(sum < 0.01);
        assert_eq!(super::levels(1_000, 0.01, 1, 0.8, 5).unwrap().len(), 5);
        assert!(super::levels(2_000_000_000, 1e-9, 2, 0.8, 4).is_err());
        // Tight rates take more words per item, never an unreachable size.
        let tight = super::levels(1_000, 1e-9, 2, 0.5, 64).unwrap();
        assert!(tight.last().unwrap().per_item > tight[0].per_item);
    }
}
