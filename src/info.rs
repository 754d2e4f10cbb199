//! What [`RedisBloom::info`](crate::RedisBloom::info) reports.

use std::time::Duration;

/// A snapshot of a filter, read in one atomic round trip.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FilterInfo {
    /// The filter's key.
    pub key: String,
    /// The filter's size in bits (its configuration: go-zero stores nothing in Redis).
    pub bits: u64,
    /// Bit locations per item.
    pub hashes: u32,
    /// Bits set to 1 (`BITCOUNT` over the filter's bytes).
    pub bits_set: u64,
    /// Bytes the key's string holds (`STRLEN`); Redis grows it up to the highest bit written.
    pub bytes: u64,
    /// Distinct items added, estimated from `bits_set` (infinite when every bit is set).
    pub estimated_items: f64,
    /// The false-positive rate for an absent item right now: `(bits_set / bits)^hashes`.
    pub estimated_fpr: f64,
    /// The key's time to live.
    pub ttl: KeyTtl,
}

/// A snapshot of a [`WindowBloom`](crate::WindowBloom): its live generations, and its totals
/// over them, read in one round trip per shard.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WindowInfo {
    /// Totals over the live generations: `bits` is one generation's size, `bits_set`, `bytes`
    /// and `estimated_items` add up the generations (an item added in two generations counts
    /// twice), `estimated_fpr` is a check's rate now (it tests every live generation), and
    /// `ttl` the whole filter's (persistent unless `expire` was called; missing when the
    /// filter has no stored parameters: nothing added since it was created or cleared).
    pub filter: FilterInfo,
    /// How long an item is surely remembered.
    pub window: std::time::Duration,
    /// Generations live at once.
    pub generations: u32,
    /// The live generations that exist, newest first.
    pub parts: Vec<GenerationInfo>,
}

/// A snapshot of a [`GrowingBloom`](crate::GrowingBloom): its levels and its totals over them.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GrowingInfo {
    /// Totals over the levels: `bits`, `bits_set` and `bytes` add them up, `hashes` is the
    /// newest level's, `estimated_items` the new items counted (as `items`), `estimated_fpr`
    /// a check's rate now (it tests every level), and `ttl` the longest-lived part's.
    pub filter: FilterInfo,
    /// Levels made so far.
    pub levels: u32,
    /// The new items those levels take, all together (all shards together).
    pub capacity: u64,
    /// The new items they took: each add of an item found in no level counts one.
    pub items: u64,
    /// The most levels the filter can have.
    pub max_levels: u32,
}

/// One level of a [`GrowingBloom`](crate::GrowingBloom), in one shard, as the filter sizes
/// it ([`GrowingBloom::levels`](crate::GrowingBloom::levels)): the level exists in Redis
/// once the levels before it have taken their capacity.
///
/// Each level is word-blocked: an item sets `bits_per_word` bits in each of `words_per_item`
/// 64-bit words, so that a check reads one 64-bit word per level and word instead of one bit
/// per hash (docs/design.md "Growing filters").
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct GrowingLevel {
    /// The new items it takes.
    pub capacity: u64,
    /// Its false-positive rate at its capacity, at most its share `P·(1−r)·r^i` of the whole.
    pub false_positive_rate: f64,
    /// Its size in bits (a multiple of 64).
    pub bits: u64,
    /// The 64-bit words an item uses.
    pub words_per_item: u32,
    /// The bits an item sets in each of its words.
    pub bits_per_word: u32,
    /// The Redis string (segment) that holds it: `{KEY}:redbloom:grow:HASH:SEGMENT` beside the
    /// level counts `{KEY}:redbloom:grow:HASH`. Levels share a segment up to 4 MiB.
    pub segment: u32,
    /// Its first bit in its segment.
    pub offset: u64,
    /// Whether large batches that add to it (as the newest level) go dense, the levels read
    /// whole and the batch's bits merged: its segment is at most 16 MiB and the levels up to it
    /// at most 64 MiB together. Past that its batches go item by item (the per-item script),
    /// about ten times slower; more shards make every shard's levels smaller (BENCHMARKS.md
    /// "Levels past 4 MiB").
    pub dense: bool,
}

impl GrowingLevel {
    /// The largest segment a dense add writes: a level past it (alone in its segment) takes
    /// its batches item by item ([`dense`](Self::dense)).
    pub const MAX_DENSE_BYTES: u64 = 16 << 20;
}

/// One live generation of a window filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct GenerationInfo {
    /// When it began, by the Redis server's clock: it holds the items added from then on,
    /// for one generation's length (window / (generations - 1)).
    pub start: std::time::SystemTime,
    /// Bits set to 1 (all shards together).
    pub bits_set: u64,
    /// Bytes its strings hold.
    pub bytes: u64,
    /// Its time to live: it expires when it leaves the window (or with the whole filter).
    pub ttl: KeyTtl,
}

/// A snapshot of a [`CountingBloom`](crate::CountingBloom): its totals, and its counters in
/// use and saturated.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CountingInfo {
    /// Totals: `bits` is the number of counters, `bits_set` the counters in use (above zero),
    /// and the estimates follow from them as for a plain filter.
    pub filter: FilterInfo,
    /// Counters above zero.
    pub counters_in_use: u64,
    /// Counters at 15, which are never decremented (they may hold more than they show).
    pub counters_saturated: u64,
}

/// The time to live of a filter's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyTtl {
    /// The key does not exist: nothing has been added (or it expired, or was cleared).
    Missing,
    /// The key exists and never expires.
    Persistent,
    /// The key expires after this long.
    Expires(Duration),
}

impl KeyTtl {
    /// Reads a `PTTL` reply: -2 for a missing key, -1 for no expiry, else milliseconds.
    pub(crate) fn from_pttl(pttl: i64) -> Self {
        match pttl {
            -2 => KeyTtl::Missing,
            ms if ms < 0 => KeyTtl::Persistent,
            ms => KeyTtl::Expires(Duration::from_millis(ms.unsigned_abs())),
        }
    }

    /// Of two shards' TTLs, the one that keeps the filter longest: a persistent key over one
    /// that expires, an expiring key over a missing one, the later expiry of two.
    pub(crate) fn longest_lived(self, other: KeyTtl) -> KeyTtl {
        match (self, other) {
            (KeyTtl::Persistent, _) | (_, KeyTtl::Persistent) => KeyTtl::Persistent,
            (KeyTtl::Expires(a), KeyTtl::Expires(b)) => KeyTtl::Expires(a.max(b)),
            (KeyTtl::Expires(a), KeyTtl::Missing) | (KeyTtl::Missing, KeyTtl::Expires(a)) => {
                KeyTtl::Expires(a)
            }
            (KeyTtl::Missing, KeyTtl::Missing) => KeyTtl::Missing,
        }
    }

    /// Whole seconds as `TTL` reports them: `Some(-1)` for no expiry, `None` for a missing key.
    pub fn as_secs(&self) -> Option<i64> {
        match self {
            KeyTtl::Missing => None,
            KeyTtl::Persistent => Some(-1),
            KeyTtl::Expires(ttl) => Some(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::KeyTtl;
    use std::time::Duration;

    #[test]
    fn the_longest_lived_shard_sets_a_sharded_filters_ttl() {
        let (short, long) = (
            KeyTtl::Expires(Duration::from_secs(5)),
            KeyTtl::Expires(Duration::from_secs(9)),
        );
        let fold = |ttls: &[KeyTtl]| {
            ttls.iter()
                .copied()
                .fold(KeyTtl::Missing, KeyTtl::longest_lived)
        };
        assert_eq!(fold(&[]), KeyTtl::Missing);
        assert_eq!(fold(&[KeyTtl::Missing, short, KeyTtl::Missing]), short);
        assert_eq!(fold(&[short, long, short]), long);
        assert_eq!(
            fold(&[long, KeyTtl::Persistent, KeyTtl::Missing]),
            KeyTtl::Persistent
        );
        assert_eq!(KeyTtl::from_pttl(-2), KeyTtl::Missing);
        assert_eq!(KeyTtl::from_pttl(-1).as_secs(), Some(-1));
        assert_eq!(KeyTtl::from_pttl(1_500).as_secs(), Some(1));
    }
}
