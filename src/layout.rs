//! Where an item's bits go: go-zero's layout, or redbloom's native one.

use crate::hash::{murmur3_x64_128, GOZERO_HASHES};

/// How items map to bit offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Layout {
    /// go-zero's `core/bloom` (SPEC.md §1): k = 14, offset i = `Sum64(item ‖ byte(i)) mod bits`.
    /// The bits are go-zero's own, so Go and Rust services share the filter; redbloom also
    /// stores the filter's parameters beside them (`{KEY}:redbloom:params`), which go-zero
    /// ignores. The default.
    #[default]
    GoZero,
    /// redbloom's own: k chosen from the target rate (SPEC.md §2), offset i =
    /// `(h1 + i·h2) mod bits` from one 128-bit murmur3 per item (double hashing, as in LevelDB
    /// and Guava). Its parameters are stored beside the bits, and a client that opens it with
    /// other parameters gets [`Error::ParamsMismatch`](crate::Error::ParamsMismatch).
    Native,
}

impl Layout {
    /// The name stored with a native filter's parameters.
    /// The layout [`name`](Layout::name) names, as stored with a filter.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        [Layout::GoZero, Layout::Native]
            .into_iter()
            .find(|layout| layout.name() == name)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Layout::GoZero => "gozero",
            Layout::Native => "native-v1",
        }
    }

    /// go-zero's fixed number of hashes, or `None` when the layout lets the rate choose.
    pub(crate) fn fixed_hashes(self) -> Option<u32> {
        match self {
            Layout::GoZero => Some(GOZERO_HASHES as u32),
            Layout::Native => None,
        }
    }
}

impl std::fmt::Display for Layout {
    /// The name the CLI takes (`--layout gozero|native`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Layout::GoZero => "gozero",
            Layout::Native => "native",
        })
    }
}

impl std::str::FromStr for Layout {
    type Err = crate::Error;

    /// `gozero` or `native` (any case; `go-zero` too).
    ///
    /// ```
    /// use redbloom::Layout;
    /// assert_eq!("native".parse::<Layout>().unwrap(), Layout::Native);
    /// assert_eq!(Layout::GoZero.to_string().parse::<Layout>().unwrap(), Layout::GoZero);
    /// assert!("fast".parse::<Layout>().is_err());
    /// ```
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.to_ascii_lowercase().as_str() {
            "gozero" | "go-zero" => Ok(Layout::GoZero),
            "native" => Ok(Layout::Native),
            _ => Err(crate::Error::InvalidConfig(format!(
                "unknown layout {text:?}: gozero or native"
            ))),
        }
    }
}

/// The native layout's offsets: `(h1 + i·h2) mod bits` for `i` in `0..hashes`, where
/// `(h1, h2)` is the item's MurmurHash3_x64_128 (seed 0), with wrapping 64-bit arithmetic.
///
/// ```
/// let offsets: Vec<u64> = redbloom::native_locations(b"hello", 1 << 20, 3).collect();
/// let (h1, h2) = redbloom::murmur3_x64_128(b"hello");
/// assert_eq!(offsets[2], h1.wrapping_add(2 * h2) % (1 << 20));
/// ```
pub fn native_locations(item: &[u8], bits: u64, hashes: u32) -> impl Iterator<Item = u64> {
    let (h1, h2) = murmur3_x64_128(item);
    (0..u64::from(hashes)).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % bits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::Geometry;
    use crate::hash::ItemHash;

    /// An item's offsets as the filter computes them: one hash, then the layout's locations.
    fn push_offsets(layout: Layout, item: &[u8], bits: u64, hashes: u32, out: &mut Vec<u64>) {
        let geometry = Geometry::new(layout, bits, hashes).unwrap();
        geometry.push_offsets(&ItemHash::of(item, layout), out);
    }

    #[test]
    fn gozero_offsets_are_the_spec_locations() {
        let mut out = vec![99];
        push_offsets(Layout::GoZero, b"hello", 64, 14, &mut out);
        assert_eq!(
            out,
            [99, 51, 34, 34, 19, 23, 2, 10, 0, 20, 32, 13, 25, 51, 53]
        );
    }

    #[test]
    fn native_offsets_step_by_h2() {
        let (h1, h2) = murmur3_x64_128(b"hello, world");
        let mut out = Vec::new();
        push_offsets(Layout::Native, b"hello, world", 1000, 7, &mut out);
        assert_eq!(out.len(), 7);
        for (i, offset) in out.iter().enumerate() {
            assert_eq!(*offset, h1.wrapping_add(h2.wrapping_mul(i as u64)) % 1000);
        }
        // Fixed values, so that a change of the stored format cannot go unnoticed.
        let fixed: Vec<u64> = native_locations(b"hello", 4294967296, 4).collect();
        assert_eq!(fixed, [1102945026, 2322315291, 3541685556, 466088525]);
    }
}
