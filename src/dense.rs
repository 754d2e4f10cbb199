//! The dense path for large batches on small filters: move the bitmap instead of its offsets.
//!
//! A `BITFIELD` costs the server about 0.25 µs per bit (parsing three or four arguments per
//! bit), so a batch of n items with k bits each costs it about n·k·0.25 µs. When the whole
//! filter is small it is cheaper to read it once (`GETRANGE`) and test the bits here, or to send
//! the batch's bits as one bitmap and OR it in: one `MULTI` with `GET` (the bytes from before),
//! `SET` of a scratch key, `BITOP OR` (in a small script that keeps the TTL) and `DEL` of the
//! scratch key. Measured on Redis 7.0.15 (`scripts/server_cost.sh`, BENCHMARKS.md): 0.3 to
//! 0.5 ms of server time per merge of a 1.4 MB filter and 1.2 to 3.1 ms at the 4 MiB limit,
//! against about 4 ms for a `BITFIELD` of 1,000 go-zero items. The final bytes are those of `SETBIT`s of the same
//! offsets, and "new" is computed from the bytes before the batch exactly as sequential
//! `SETBIT`s would report it.

use crate::io::tx::{Replies, Slot, Tx};

/// The largest filter taken whole: every dense call moves the filter's bytes, and Redis serves
/// nothing else during the merge transaction, so this bounds how long one call holds the
/// server (and the scratch key's memory, as large as the filter, while the merge runs).
pub(crate) const MAX_BYTES: u64 = 4 << 20;

/// The largest filter read whole for a check, in [`READ_CHUNK`] pieces: a read holds the
/// server only while it copies one chunk, but every batch in flight holds a copy here.
pub(crate) const MAX_READ_BYTES: u64 = 64 << 20;

/// Bytes per `GETRANGE` of a dense read: 0.25 to 0.75 ms of server time each.
pub(crate) const READ_CHUNK: u64 = 4 << 20;

/// Whether the batch's `BITFIELD` would carry several times as many bytes as the filter
/// (each bit takes about 30 bytes of arguments).
fn outweighs(bits: u64, items: usize, hashes: u32) -> bool {
    items as u64 * u64::from(hashes) * 8 >= bits.div_ceil(8)
}

/// Whether adding a batch of `items` items with `hashes` bits each is cheaper dense than as
/// `BITFIELD` on a filter of `bits` bits: the filter is at most [`MAX_BYTES`] and the batch
/// outweighs it.
pub(crate) fn worth_it(bits: u64, items: usize, hashes: u32) -> bool {
    bits.div_ceil(8) <= MAX_BYTES && outweighs(bits, items, hashes)
}

/// Whether checking such a batch is cheaper by reading the filter: at most [`MAX_READ_BYTES`],
/// and the batch outweighs it.
pub(crate) fn read_worth_it(bits: u64, items: usize, hashes: u32) -> bool {
    bits.div_ceil(8) <= MAX_READ_BYTES && outweighs(bits, items, hashes)
}

/// The `GETRANGE` byte ranges (inclusive) that read a filter of `bits` bits.
pub(crate) fn read_ranges(bits: u64) -> impl Iterator<Item = (u64, u64)> {
    let last = (bits - 1) / 8;
    (0..=last / READ_CHUNK).map(move |i| (i * READ_CHUNK, ((i + 1) * READ_CHUNK - 1).min(last)))
}

/// The `GETRANGE`s that read a key of `bits` bits whole, in [`READ_CHUNK`] pieces, added to a
/// step; [`Whole::take`] puts the pieces together from its replies.
pub(crate) fn read_whole(tx: &mut Tx, key: &str, bits: u64) -> Whole {
    Whole(
        read_ranges(bits)
            .map(|(first, last)| {
                tx.add(
                    redis::cmd("GETRANGE")
                        .arg(key)
                        .arg(first)
                        .arg(last)
                        .to_owned(),
                )
            })
            .collect(),
    )
}

/// A key's `GETRANGE`s in a step (see [`read_whole`]).
#[derive(Debug)]
pub(crate) struct Whole(Vec<Slot<Vec<u8>>>);

impl Whole {
    /// The key's bytes (as long as the key's string, up to the size read).
    ///
    /// # Errors
    /// [`Error::UnexpectedReply`](crate::Error::UnexpectedReply) when a reply is missing or not
    /// bytes.
    pub(crate) fn take(self, replies: &mut Replies) -> crate::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        for chunk in self.0 {
            bytes.extend(replies.take(chunk)?);
        }
        Ok(bytes)
    }
}

/// A batch size for bulk adds (`max_bytes` = [`MAX_BYTES`]) or checks ([`MAX_READ_BYTES`]):
/// large enough to take the dense path when the filter allows it, else 1,000 items per
/// `BITFIELD` (about 4 ms of server time for go-zero's 14 bits per item).
pub(crate) fn batch_size(bits: u64, hashes: u32, max_bytes: u64) -> usize {
    let bytes = bits.div_ceil(8);
    if bytes <= max_bytes {
        // Twice the break-even, so that the last, partial batches stay dense too.
        (bytes.div_ceil(8 * u64::from(hashes)) * 2).clamp(1_000, 1_000_000) as usize
    } else {
        1_000
    }
}

/// The bitmap with exactly `offsets` set, as long as its highest offset needs (Redis's bit
/// order: offset o is bit `0x80 >> (o & 7)` of byte `o >> 3`).
pub(crate) fn bitmap(offsets: &[u64]) -> Vec<u8> {
    let len = offsets.iter().max().map_or(0, |&max| max / 8 + 1);
    let mut bitmap = vec![0u8; len as usize];
    for &offset in offsets {
        set(&mut bitmap, offset);
    }
    bitmap
}

/// Whether bit `offset` is set; bits past the end are 0, as in Redis.
pub(crate) fn test(bitmap: &[u8], offset: u64) -> bool {
    bitmap
        .get((offset / 8) as usize)
        .is_some_and(|byte| byte & (0x80 >> (offset & 7)) != 0)
}

fn set(bitmap: &mut [u8], offset: u64) {
    bitmap[(offset / 8) as usize] |= 0x80 >> (offset & 7);
}

/// Per item (`hashes` offsets each): whether all its bits are set in `bitmap`.
pub(crate) fn present(bitmap: &[u8], offsets: &[u64], hashes: usize) -> Vec<bool> {
    offsets
        .chunks(hashes)
        .map(|item| item.iter().all(|&offset| test(bitmap, offset)))
        .collect()
}

/// Per item, in order: whether setting its bits into `old` flipped one, counting the bits the
/// items before it in the batch set, as sequential `SETBIT`s would.
pub(crate) fn new_flags(mut old: Vec<u8>, offsets: &[u64], hashes: usize) -> Vec<bool> {
    if let Some(&max) = offsets.iter().max() {
        let len = (max / 8 + 1) as usize;
        if old.len() < len {
            old.resize(len, 0);
        }
    }
    offsets
        .chunks(hashes)
        .map(|item| {
            let mut new = false;
            for &offset in item {
                new |= !test(&old, offset);
                set(&mut old, offset);
            }
            new
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmaps_use_redis_bit_order() {
        // SPEC.md §1: "hello" then "world" with 64 bits leaves a52c9b5aa00a14.
        let hello = crate::gozero_locations(b"hello", 64);
        let world = crate::gozero_locations(b"world", 64);
        assert_eq!(bitmap(&hello), [0xa0, 0x24, 0x19, 0x40, 0xa0, 0x00, 0x14]);
        let both = bitmap(&[hello, world].concat());
        assert_eq!(both, [0xa5, 0x2c, 0x9b, 0x5a, 0xa0, 0x0a, 0x14]);
        assert!(test(&both, 0) && !test(&both, 1) && !test(&both, 10_000));
        assert_eq!(bitmap(&[]), Vec::<u8>::new());
    }

    #[test]
    fn new_flags_match_sequential_setbits() {
        let hello = crate::gozero_locations(b"hello", 64);
        let world = crate::gozero_locations(b"world", 64);
        let batch = [hello, world, hello].concat();
        assert_eq!(new_flags(Vec::new(), &batch, 14), [true, true, false]);
        let after_hello = bitmap(&hello);
        assert_eq!(
            new_flags(after_hello.clone(), &batch, 14),
            [false, true, false]
        );
        assert_eq!(present(&after_hello, &batch, 14), [true, false, true]);
        assert_eq!(present(&[], &batch, 14), [false, false, false]);
    }

    #[test]
    fn reads_cover_the_filter_in_chunks() {
        assert_eq!(read_ranges(64).collect::<Vec<_>>(), [(0, 7)]);
        let chunk = READ_CHUNK;
        let ranges: Vec<_> = read_ranges(8 * (2 * chunk + 10)).collect();
        assert_eq!(
            ranges,
            [
                (0, chunk - 1),
                (chunk, 2 * chunk - 1),
                (2 * chunk, 2 * chunk + 9)
            ]
        );
        let exact: Vec<_> = read_ranges(8 * chunk).collect();
        assert_eq!(exact, [(0, chunk - 1)]);
    }

    #[test]
    fn dense_only_pays_on_small_filters_and_big_batches() {
        let mib = 8 << 20;
        assert!(worth_it(mib, 10_000, 14));
        assert!(
            !worth_it(mib, 1_000, 14),
            "the bitmap would outweigh the offsets"
        );
        assert!(!worth_it(64 * mib, 1_000_000, 14), "past MAX_BYTES");
        assert!(worth_it(64, 1, 14));
        assert_eq!(batch_size(1024 * mib, 14, MAX_READ_BYTES), 1_000);
        assert_eq!(
            batch_size(64 * mib, 14, MAX_BYTES),
            1_000,
            "adds cannot go dense"
        );
        assert!(
            batch_size(64 * mib, 14, MAX_READ_BYTES) > 100_000,
            "checks can"
        );
        assert!(
            !read_worth_it(1024 * mib, 10_000_000, 14),
            "past MAX_READ_BYTES"
        );
        assert!(read_worth_it(64 * mib, 1_000_000, 14) && !read_worth_it(64 * mib, 10_000, 14));
        let batch = batch_size(11_000_000, 14, MAX_BYTES);
        assert!(worth_it(11_000_000, batch, 14) && worth_it(11_000_000, batch / 2, 14));
    }
}
