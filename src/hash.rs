//! Where an item's bits go in the go-zero layout (SPEC.md §1).
//!
//! MurmurHash3_x64_128 (seed 0) is written out here over byte slices rather than taken from the
//! `murmur3` crate's `Read`-based API, so that the 14 hashes of `data ‖ byte(i)` can share the
//! mixing of every 16-byte block of `data` and allocate nothing. The crate stays the reference:
//! the tests check this code against it.

/// Bit locations per item in the go-zero layout (go-zero's `maps`).
pub const GOZERO_HASHES: usize = 14;

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

/// The 128-bit MurmurHash3 (x64 variant, seed 0) of `data`, as `(h1, h2)`.
///
/// Bit-identical to the `murmur3` crate's `murmur3_x64_128(_, 0)` (low, high 64 bits), computed
/// directly over the slice.
///
/// ```
/// assert_eq!(
///     redbloom::murmur3_x64_128(b"hello"),
///     (0xcbd8a7b341bd9b02, 0x5b1e906a48ae1d19)
/// );
/// ```
pub fn murmur3_x64_128(data: &[u8]) -> (u64, u64) {
    let (state, tail) = State::absorb_blocks(data);
    let (k1, k2) = tail_words(data, tail.len());
    state.tail(k1, k2).finish(data.len() as u64)
}

/// The seed of the hash that picks an item's shard: any other than 0, so the shard is
/// independent of the bit offsets, which both layouts take from seed 0.
const SHARD_SEED: u32 = 0x9747_b28c;

/// The shard of `item` among `shards` (at least 1): h1 of MurmurHash3_x64_128 with
/// [`SHARD_SEED`], scaled to `0..shards` by a multiply and shift.
pub(crate) fn shard_of(item: &[u8], shards: u32) -> usize {
    let (state, tail) = State::absorb_blocks_seeded(item, SHARD_SEED);
    let (k1, k2) = tail_words(item, tail.len());
    let (h1, _) = state.tail(k1, k2).finish(item.len() as u64);
    ((u128::from(h1) * u128::from(shards)) >> 64) as usize
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
/// The 14 inputs differ only in their last byte, so the full 16-byte blocks of `data` are mixed
/// once; each `i` then only mixes the last block (or tail) holding its suffix byte and runs the
/// finalization. Nothing is allocated; the output is bit-identical to hashing each
/// `data ‖ byte(i)` from scratch.
///
/// ```
/// let hello = redbloom::gozero_locations(b"hello", 64);
/// assert_eq!(hello, [51, 34, 34, 19, 23, 2, 10, 0, 20, 32, 13, 25, 51, 53]);
/// ```
pub fn gozero_locations(data: &[u8], bits: u64) -> [u64; GOZERO_HASHES] {
    debug_assert!(bits > 0, "a filter has at least one bit");
    gozero_hashes(data).map(|hash| hash % bits)
}

/// go-zero's 14 hashes of `data` before `mod bits`: `Sum64(data ‖ byte(i))` for `i` in
/// `0..14`, from which its locations in a filter of any size follow.
fn gozero_hashes(data: &[u8]) -> [u64; GOZERO_HASHES] {
    // The blocks that lie wholly inside `data` are common to all 14 inputs.
    let (state, rest) = State::absorb_blocks(data);
    // The suffix byte lands at `rest.len()` (0..=15) of the last, zero-padded block.
    let at = rest.len();
    let (k1, k2) = tail_words(data, at);
    let total = data.len() as u64 + 1;
    let shift = 8 * (at % 8) as u32;
    if at == 15 {
        // `data ‖ i` ends with a full block and has no tail.
        std::array::from_fn(|i| {
            let k2 = k2 | ((i as u64) << shift);
            state.block(k1, k2).finish(total).0
        })
    } else if at >= 8 {
        // The suffix byte is in the tail's second word; the first word is the same for all.
        let state = state.tail(k1, 0);
        std::array::from_fn(|i| {
            let k2 = k2 | ((i as u64) << shift);
            state.tail(0, k2).finish(total).0
        })
    } else {
        // The tail is at most 8 bytes: only its first word is non-zero.
        std::array::from_fn(|i| {
            let k1 = k1 | ((i as u64) << shift);
            state.tail(k1, 0).finish(total).0
        })
    }
}

/// An item's hashes, computed once: its locations in any filter of its layout, whatever the
/// size, follow from them (go-zero: the 14 `Sum64` values before `mod bits`; native: the
/// 128-bit murmur3's two halves), so that one hash serves every key an item goes to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ItemHash {
    GoZero([u64; GOZERO_HASHES]),
    Native(u64, u64),
}

impl ItemHash {
    /// `item`'s hashes for `layout`.
    pub(crate) fn of(item: &[u8], layout: crate::Layout) -> Self {
        match layout {
            crate::Layout::GoZero => ItemHash::GoZero(gozero_hashes(item)),
            crate::Layout::Native => {
                let (h1, h2) = murmur3_x64_128(item);
                ItemHash::Native(h1, h2)
            }
        }
    }
}

/// The last `tail` (0..=15) bytes of `data` as the two little-endian words of a zero-padded
/// block, like the reference's tail switch builds them.
#[inline(always)]
fn tail_words(data: &[u8], tail: usize) -> (u64, u64) {
    debug_assert!(tail < 16 && tail <= data.len());
    let words = if let Some(last) = data.last_chunk::<16>() {
        // Load the last 16 bytes whole and shift out those of the previous blocks: no copy
        // loop, no branch on the tail length (a shift by 128 means an empty tail).
        u128::from_le_bytes(*last)
            .checked_shr(8 * (16 - tail) as u32)
            .unwrap_or(0)
    } else {
        // Shorter than one block: the whole input is the tail.
        let mut block = [0u8; 16];
        block[..tail].copy_from_slice(data);
        u128::from_le_bytes(block)
    };
    (words as u64, (words >> 64) as u64)
}

#[inline(always)]
fn mix_k1(k1: u64) -> u64 {
    k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

#[inline(always)]
fn mix_k2(k2: u64) -> u64 {
    k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

#[inline(always)]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// MurmurHash3_x64_128's running `(h1, h2)`.
#[derive(Clone, Copy)]
struct State {
    h1: u64,
    h2: u64,
}

impl State {
    /// Mixes every full 16-byte block of `data` into the seed-0 state; returns the state and
    /// the remaining 0..=15 bytes.
    #[inline(always)]
    fn absorb_blocks(data: &[u8]) -> (State, &[u8]) {
        Self::absorb_blocks_seeded(data, 0)
    }

    /// [`absorb_blocks`](State::absorb_blocks) from a seed other than 0.
    #[inline(always)]
    fn absorb_blocks_seeded(data: &[u8], seed: u32) -> (State, &[u8]) {
        let mut state = State {
            h1: u64::from(seed),
            h2: u64::from(seed),
        };
        let blocks = data.chunks_exact(16);
        let rest = blocks.remainder();
        for block in blocks {
            let (lo, hi) = block.split_at(8);
            state = state.block(
                u64::from_le_bytes(lo.try_into().expect("8 bytes")),
                u64::from_le_bytes(hi.try_into().expect("8 bytes")),
            );
        }
        (state, rest)
    }

    /// Mixes one full block of words `k1`, `k2`.
    #[inline(always)]
    fn block(self, k1: u64, k2: u64) -> State {
        let mut h1 = self.h1 ^ mix_k1(k1);
        h1 = h1.rotate_left(27).wrapping_add(self.h2);
        h1 = h1.wrapping_mul(5).wrapping_add(0x52dc_e729);
        let mut h2 = self.h2 ^ mix_k2(k2);
        h2 = h2.rotate_left(31).wrapping_add(h1);
        h2 = h2.wrapping_mul(5).wrapping_add(0x3849_5ab5);
        State { h1, h2 }
    }

    /// Mixes the zero-padded tail words `k1`, `k2`. A zero word mixes to zero, so this equals
    /// the reference's `len & 15` switch for any tail length, including none.
    #[inline(always)]
    fn tail(self, k1: u64, k2: u64) -> State {
        State {
            h1: self.h1 ^ mix_k1(k1),
            h2: self.h2 ^ mix_k2(k2),
        }
    }

    /// Finalizes for an input of `len` bytes; returns `(h1, h2)`.
    #[inline(always)]
    fn finish(self, len: u64) -> (u64, u64) {
        let mut h1 = self.h1 ^ len;
        let mut h2 = self.h2 ^ len;
        h1 = h1.wrapping_add(h2);
        h2 = h2.wrapping_add(h1);
        h1 = fmix64(h1);
        h2 = fmix64(h2);
        h1 = h1.wrapping_add(h2);
        h2 = h2.wrapping_add(h1);
        (h1, h2)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use proptest::prelude::*;

    use super::*;

    /// The `murmur3` crate's MurmurHash3_x64_128 (seed 0) of `data ‖ suffix`, as `(h1, h2)`.
    fn oracle(data: &[u8], suffix: &[u8]) -> (u64, u64) {
        let hash = murmur3::murmur3_x64_128(&mut data.chain(suffix), 0).expect("slices read");
        (hash as u64, (hash >> 64) as u64)
    }

    /// The original implementation: 14 hashes of `data ‖ byte(i)` with the crate.
    fn oracle_locations(data: &[u8], bits: u64) -> [u64; GOZERO_HASHES] {
        std::array::from_fn(|i| oracle(data, &[i as u8]).0 % bits)
    }

    /// Deterministic pseudo-random bytes (xorshift64*).
    fn pseudo_random(len: usize, mut seed: u64) -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed ^= seed >> 12;
                seed ^= seed << 25;
                seed ^= seed >> 27;
                (seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
            })
            .collect()
    }

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
    fn shards_come_from_a_seeded_hash() {
        for data in [
            &b""[..],
            b"hello",
            b"a longer item that spans more than one block",
        ] {
            let mut reader = data;
            let h1 = murmur3::murmur3_x64_128(&mut reader, SHARD_SEED).unwrap() as u64;
            for shards in [1u32, 2, 7, 8, 1000] {
                let want = ((u128::from(h1) * u128::from(shards)) >> 64) as usize;
                assert_eq!(shard_of(data, shards), want);
            }
        }
        // Spread: 80,000 items over 8 shards, each within 3% of 10,000.
        let mut counts = [0u32; 8];
        for i in 0..80_000 {
            counts[shard_of(format!("item:{i}").as_bytes(), 8)] += 1;
        }
        assert!(
            counts.iter().all(|&n| (9_700..=10_300).contains(&n)),
            "{counts:?}"
        );
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

    #[test]
    fn every_length_up_to_64_matches_the_murmur3_crate() {
        let bits_choices = [1, 2, 7, 64, 1000, 20_000_000, 1 << 32, u64::MAX];
        for len in 0..=64 {
            for seed in 1..=4u64 {
                let data =
                    pseudo_random(len, seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ len as u64);
                assert_eq!(murmur3_x64_128(&data), oracle(&data, &[]), "len {len}");
                for bits in bits_choices {
                    assert_eq!(
                        gozero_locations(&data, bits),
                        oracle_locations(&data, bits),
                        "len {len}, {bits} bits"
                    );
                }
            }
            // Edge bytes: all zeros and all 0xff.
            for fill in [0x00, 0xff] {
                let data = vec![fill; len];
                assert_eq!(murmur3_x64_128(&data), oracle(&data, &[]));
                assert_eq!(
                    gozero_locations(&data, 1 << 32),
                    oracle_locations(&data, 1 << 32),
                    "len {len} of {fill:#x}"
                );
            }
        }
    }

    /// Items of every length 0..=48 (each `len % 16` several times over), extra weight on the
    /// block boundaries (`len % 16` of 0 and 15), and any length below 200.
    fn item() -> impl Strategy<Value = Vec<u8>> {
        let len = prop_oneof![
            3 => 0..=48usize,
            1 => prop::sample::select(vec![0usize, 15, 16, 31, 32, 47, 48]),
            2 => 0..200usize,
        ];
        len.prop_flat_map(|len| prop::collection::vec(any::<u8>(), len))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn locations_match_the_murmur3_crate(data in item(), bits in 1..=(1u64 << 32)) {
            prop_assert_eq!(gozero_locations(&data, bits), oracle_locations(&data, bits));
        }

        #[test]
        fn hash_matches_the_murmur3_crate(data in item()) {
            prop_assert_eq!(murmur3_x64_128(&data), oracle(&data, &[]));
            prop_assert_eq!(sum64(&data), oracle(&data, &[]).0);
        }
    }
}
