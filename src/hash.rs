//! Where an item's bits go in the go-zero layout (SPEC.md §1).

use std::io::Read;

/// Bit locations per item in the go-zero layout (go-zero's `maps`).
pub const GOZERO_HASHES: usize = 14;

/// The 128-bit MurmurHash3 (x64 variant, seed 0) of `data`, as `(h1, h2)`.
pub fn murmur3_x64_128(data: &[u8]) -> (u64, u64) {
    hash_reader(data)
}

/// go-zero's `hash.Hash`: h1 of MurmurHash3_x64_128 with seed 0 (spaolacci/murmur3's `Sum64`).
///
/// ```
/// assert_eq!(redbloom::sum64(b"hello"), 0xcbd8a7b341bd9b02);
/// ```
pub fn sum64(data: &[u8]) -> u64 {
    murmur3_x64_128(data).0
}

/// The 14 bit offsets of `data` in a go-zero filter of `bits` bits, in go-zero's order:
/// `Sum64(data ‖ byte(i)) mod bits` for `i` in `0..14`. Duplicates are kept.
///
/// `bits` must not be 0 (a [`RedisBloom`](crate::RedisBloom) never has 0 bits).
///
/// ```
/// let hello = redbloom::gozero_locations(b"hello", 64);
/// assert_eq!(hello, [51, 34, 34, 19, 23, 2, 10, 0, 20, 32, 13, 25, 51, 53]);
/// ```
pub fn gozero_locations(data: &[u8], bits: u64) -> [u64; GOZERO_HASHES] {
    debug_assert!(bits > 0, "a filter has at least one bit");
    std::array::from_fn(|i| {
        let suffix = [i as u8];
        hash_reader(data.chain(&suffix[..])).0 % bits
    })
}

/// Hashes whatever `source` yields without copying it into one buffer.
fn hash_reader(mut source: impl Read) -> (u64, u64) {
    // Reading from byte slices cannot fail.
    let hash = murmur3::murmur3_x64_128(&mut source, 0).unwrap_or_default();
    (hash as u64, (hash >> 64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum64_and_h2_match_the_spec_vectors() {
        let vectors: [(&[u8], u64, u64); 4] = [
            (b"", 0, 0),
            (b"hello", 0xcbd8a7b341bd9b02, 0x5b1e906a48ae1d19),
            (b"hello, world", 0x342fac623a5ebc8e, 0x4cdcbc079642414d),
            (
                b"The quick brown fox jumps over the lazy dog.",
                0xcd99481f9ee902c9,
                0x695da1a38987b6e7,
            ),
        ];
        for (data, h1, h2) in vectors {
            assert_eq!(murmur3_x64_128(data), (h1, h2), "{:?}", data);
            assert_eq!(sum64(data), h1);
        }
    }

    #[test]
    fn locations_match_the_spec_vectors() {
        let vectors: [(&[u8], u64, [u64; 14]); 8] = [
            (
                b"hello",
                64,
                [51, 34, 34, 19, 23, 2, 10, 0, 20, 32, 13, 25, 51, 53],
            ),
            (
                b"world",
                64,
                [7, 46, 46, 5, 27, 22, 12, 19, 53, 30, 44, 25, 16, 28],
            ),
            (
                b"",
                1000,
                [
                    669, 862, 706, 449, 229, 392, 35, 359, 702, 853, 632, 167, 457, 838,
                ],
            ),
            (
                b"hello",
                20000,
                [
                    14195, 7778, 19938, 2931, 6359, 11362, 18058, 10240, 12212, 1248, 5389, 7865,
                    10195, 6485,
                ],
            ),
            (
                b"hello",
                1048576,
                [
                    438579, 442146, 250722, 264083, 795607, 776962, 884874, 93760, 413268, 479456,
                    870157, 559257, 49971, 957813,
                ],
            ),
            (
                b"hello",
                4294967296,
                [
                    1803989299, 298237730, 1194578786, 3214149523, 3436979159, 1310448386,
                    2396881034, 3392237120, 1495682644, 2181517536, 39667469, 2162722969,
                    3122709299, 2645466485,
                ],
            ),
            (
                b"user:10086",
                20000000,
                [
                    16762202, 11372775, 9831452, 14171817, 685721, 16954092, 3545453, 7740777,
                    11964456, 11867116, 4502049, 4479283, 325787, 4794232,
                ],
            ),
            (
                &[0, 1, 2],
                64,
                [24, 15, 46, 16, 6, 47, 15, 55, 42, 16, 50, 36, 55, 54],
            ),
        ];
        for (data, bits, want) in vectors {
            assert_eq!(
                gozero_locations(data, bits),
                want,
                "{:?} with {bits} bits",
                data
            );
        }
    }

    #[test]
    fn locations_hash_data_followed_by_the_index_byte() {
        let data = b"a longer item that spans more than one sixteen-byte block";
        for (i, location) in gozero_locations(data, u64::MAX).into_iter().enumerate() {
            let mut joined = data.to_vec();
            joined.push(i as u8);
            assert_eq!(location, sum64(&joined) % u64::MAX);
        }
    }
}
