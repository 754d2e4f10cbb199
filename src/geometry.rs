//! A filter's shape: its layout, its size in bits and its bits per item. Where an item's bits
//! go in one key, checked before anything is sent, and the parameters stored with a filter.

use crate::error::{Error, Result};
use crate::hash::ItemHash;
use crate::layout::Layout;
use crate::sizing::MAX_BITS;

/// The most bits per item a filter may use: far beyond any useful rate (k = 64 is a rate of
/// about 1e-20), and a bound on the work one item can ask of the server.
pub(crate) const MAX_HASHES: u32 = 64;

/// Layout, size and bits per item of one key's bits (or, for the whole of a sharded filter,
/// of all its keys together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub(crate) layout: Layout,
    pub(crate) bits: u64,
    pub(crate) hashes: u32,
}

impl Geometry {
    /// A checked shape.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `bits` is not in `1..=2^32` or `hashes` does not fit the
    /// layout (go-zero's takes only 14; any layout at most [`MAX_HASHES`]).
    pub(crate) fn new(layout: Layout, bits: u64, hashes: u32) -> Result<Self> {
        if !(1..=MAX_BITS).contains(&bits) {
            return Err(Error::InvalidConfig(format!(
                "bits must be between 1 and 2^32 (4294967296), not {bits}"
            )));
        }
        if !(1..=MAX_HASHES).contains(&hashes) || layout.fixed_hashes().is_some_and(|k| k != hashes)
        {
            return Err(Error::InvalidConfig(format!(
                "{hashes} hashes per item do not fit the {} layout",
                layout.name()
            )));
        }
        Ok(Geometry {
            layout,
            bits,
            hashes,
        })
    }

    /// The same layout and bits per item over `bits` bits in all (a sharded filter's total).
    pub(crate) fn total(self, bits: u64) -> Self {
        Geometry { bits, ..self }
    }

    /// Appends the item's `hashes` offsets in this filter to `out`.
    pub(crate) fn push_offsets(&self, hash: &ItemHash, out: &mut Vec<u64>) {
        let bits = self.bits;
        match *hash {
            ItemHash::GoZero(hashes) => out.extend(hashes.iter().map(|h| h % bits)),
            ItemHash::Native(h1, h2) => out.extend(
                (0..u64::from(self.hashes)).map(|i| h1.wrapping_add(i.wrapping_mul(h2)) % bits),
            ),
        }
    }

    /// Whether `test` holds for every one of the item's offsets in this filter (in order,
    /// stopping at the first that fails), with no allocation: a near cache's lookup.
    pub(crate) fn all(&self, hash: &ItemHash, mut test: impl FnMut(u64) -> bool) -> bool {
        let bits = self.bits;
        match *hash {
            ItemHash::GoZero(hashes) => hashes.iter().all(|h| test(h % bits)),
            ItemHash::Native(h1, h2) => (0..u64::from(self.hashes))
                .all(|i| test(h1.wrapping_add(i.wrapping_mul(h2)) % bits)),
        }
    }

    /// Every item's bit offsets, item after item, hashed once and checked against the size
    /// before anything is sent.
    pub(crate) fn offsets<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<u64>> {
        let mut offsets = Vec::with_capacity(items.len() * self.hashes as usize);
        for item in items {
            self.push_offsets(&ItemHash::of(item.as_ref(), self.layout), &mut offsets);
        }
        check_offsets(&offsets, self.bits)?;
        Ok(offsets)
    }

    /// The most bytes the bits take: a longer string was written by someone else.
    pub(crate) fn max_bytes(&self) -> u64 {
        self.bits.div_ceil(8)
    }

    /// The parameters stored beside a filter: `field=value` pairs (`shards` only when more
    /// than one).
    pub(crate) fn fingerprint(&self, shards: u32) -> String {
        let shards = match shards {
            0 | 1 => String::new(),
            n => format!(" shards={n}"),
        };
        format!(
            "layout={} bits={} hashes={} hash=murmur3_x64_128{shards}",
            self.layout.name(),
            self.bits,
            self.hashes
        )
    }
}

/// go-zero's `ErrTooLargeOffset` check: every offset must be below the filter's size.
pub(crate) fn check_offsets(offsets: &[u64], bits: u64) -> Result<()> {
    match offsets.iter().find(|&&offset| offset >= bits) {
        Some(&offset) => Err(Error::OffsetOutOfRange { offset, bits }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{gozero_locations, native_locations};

    #[test]
    fn offsets_at_or_past_the_size_are_rejected() {
        assert!(check_offsets(&[0, 63], 64).is_ok());
        let err = check_offsets(&[3, 64, 65], 64).unwrap_err();
        assert!(
            matches!(
                err,
                Error::OffsetOutOfRange {
                    offset: 64,
                    bits: 64
                }
            ),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "bit offset 64 is out of range for a filter of 64 bits"
        );
    }

    #[test]
    fn shapes_are_checked() {
        for bits in [0, MAX_BITS + 1, u64::MAX] {
            assert!(Geometry::new(Layout::GoZero, bits, 14).is_err(), "{bits}");
        }
        assert!(Geometry::new(Layout::GoZero, 64, 7).is_err());
        assert!(Geometry::new(Layout::Native, 64, 0).is_err());
        assert!(Geometry::new(Layout::Native, 64, MAX_HASHES + 1).is_err());
        assert_eq!(
            Geometry::new(Layout::GoZero, MAX_BITS, 14).unwrap().bits,
            MAX_BITS
        );
    }

    #[test]
    fn offsets_are_each_items_locations_in_order_from_one_hash() {
        let gozero = Geometry::new(Layout::GoZero, 64, 14).unwrap();
        let offsets = gozero.offsets(&["hello", "world"]).unwrap();
        assert_eq!(offsets[..14], gozero_locations(b"hello", 64));
        assert_eq!(offsets[14..], gozero_locations(b"world", 64));
        // One hash, two sizes: the same locations as hashing for each.
        let hash = ItemHash::of(b"hello", Layout::GoZero);
        let mut big = Vec::new();
        gozero.total(20_000).push_offsets(&hash, &mut big);
        assert_eq!(big, gozero_locations(b"hello", 20_000));
        let native = Geometry::new(Layout::Native, 1 << 20, 5).unwrap();
        let hash = ItemHash::of(b"hello", Layout::Native);
        let mut out = Vec::new();
        native.push_offsets(&hash, &mut out);
        assert_eq!(
            out,
            native_locations(b"hello", 1 << 20, 5).collect::<Vec<_>>()
        );
    }

    #[test]
    fn fingerprints_name_every_parameter() {
        let native = Geometry::new(Layout::Native, 1000, 7).unwrap();
        assert_eq!(
            native.fingerprint(1),
            "layout=native-v1 bits=1000 hashes=7 hash=murmur3_x64_128"
        );
        assert!(native.total(4000).fingerprint(4).ends_with(" shards=4"));
        assert_eq!(native.max_bytes(), 125);
    }
}
