//! The dense path for large batches: move bitmaps instead of offsets.
//!
//! A `BITFIELD` costs the server about 0.25 µs per bit (parsing three or four arguments per
//! bit), so a batch of n items with k bits each costs it about n·k·0.25 µs. When the batch
//! outweighs the filter it is cheaper to read the filter's bytes (`GETRANGE`) and test the bits
//! here, or to send the batch's bits as a bitmap and OR it in:
//!
//! - **Whole** (a filter of up to [`MAX_BYTES`]): one `MULTI` with `GET` (the bytes from
//!   before), `SET` of a scratch key, `BITOP OR` (in a small script that keeps the TTL) and `DEL`
//!   of the scratch key. Measured on Redis 7.0.15 (`scripts/server_cost.sh`, BENCHMARKS.md): 0.3
//!   to 0.5 ms of server time per merge of a 1.4 MB filter and 1.2 to 3.1 ms at the 4 MiB limit,
//!   against about 4 ms for a `BITFIELD` of 1,000 go-zero items.
//! - **By ranges** (larger filters, up to 512 MiB): the key is cut into ranges of R bytes
//!   ([`Builder::merge_chunk_bytes`](crate::Builder::merge_chunk_bytes), default
//!   [`RANGE_BYTES`]); each range the batch touches is one `MULTI` of `SET` (the range's bitmap
//!   into a scratch key) and `lua/merge_range.lua` (`GETRANGE`, `BITOP OR`, `SETRANGE`), which
//!   replies with the range's bytes from before. About 4 ns of server time per byte, so one
//!   range of 128 KiB holds the server about 0.5 ms whatever the key's size. Checks of keys over
//!   [`MAX_BYTES`] read the ranges they need, R bytes per `GETRANGE`.
//!
//! Either way the final bytes are those of `SETBIT`s of the same offsets, and "new" is
//! computed from the bytes before the batch exactly as sequential `SETBIT`s would report it
//! (by ranges: range by range, see [`Grouped`]).

use crate::io::tx::{Replies, Slot, Tx};

/// The largest filter taken whole: every dense call moves the filter's bytes, and Redis serves
/// nothing else during the merge transaction, so this bounds how long one call holds the
/// server (and the scratch key's memory, as large as the filter, while the merge runs).
pub(crate) const MAX_BYTES: u64 = 4 << 20;

/// What the last dense add of a key found, which decides whether the next first probes that
/// its batch sets a new bit (`lua/probe.lua`): a probe saves a batch of items already there (a
/// file loaded again) every write, and costs a batch of new items server time (its bitmap
/// staged once more, an AND and two counts, the bitmap passed through Lua). So a dense add
/// probes after one that added no new item, not after one that did. Before any answer (a
/// load's first batches go together), a recorded add probes (its merge costs more than the
/// probe: it records the bytes from before), an unrecorded one only one at a time (its merge
/// costs less). So a load of new items probes only its first batches (recorded) or once; a
/// load of items already there probes every batch (recorded) or all but those sent beside its
/// first, and writes nothing for them. Shared by a key's clones.
#[derive(Debug, Default)]
pub(crate) struct Seen(std::sync::atomic::AtomicU8);

impl Seen {
    /// No dense add answered yet, none probing.
    const UNKNOWN: u8 = 0;
    /// No dense add answered yet, one probing.
    const PROBING: u8 = 1;
    const NEW: u8 = 2;
    const NONE_NEW: u8 = 3;

    /// Whether a dense add probes first; `recorded`: its answers are recorded across retries.
    pub(crate) fn probes(&self, recorded: bool) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        match self.0.load(Relaxed) {
            Self::NONE_NEW => true,
            Self::UNKNOWN | Self::PROBING if recorded => true,
            Self::UNKNOWN => self
                .0
                .compare_exchange(Self::UNKNOWN, Self::PROBING, Relaxed, Relaxed)
                .is_ok(),
            _ => false,
        }
    }

    /// A dense add's answers, remembered.
    pub(crate) fn answered(&self, new: &[bool]) {
        let found = match new.iter().any(|&new| new) {
            true => Self::NEW,
            false => Self::NONE_NEW,
        };
        self.0.store(found, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The largest key read whole for a check, in [`READ_CHUNK`] pieces: a read holds the
/// server only while it copies one chunk, but every batch in flight holds a copy here. (The
/// plain filter reads keys over [`MAX_BYTES`] by ranges instead; other kinds still read up to
/// this whole.)
pub(crate) const MAX_READ_BYTES: u64 = 64 << 20;

/// Bytes per `GETRANGE` of a dense read: 0.25 to 0.75 ms of server time each.
pub(crate) const READ_CHUNK: u64 = 4 << 20;

/// Bytes per range of a merge or read by ranges, unless
/// [`Builder::merge_chunk_bytes`](crate::Builder::merge_chunk_bytes) says otherwise: one merge
/// step of this size holds the server about 0.5 ms (smaller ones cost more per byte: about
/// 30 µs per step besides; larger ones too, as their strings leave the CPU's caches).
pub(crate) const RANGE_BYTES: u64 = 128 << 10;

/// The smallest range [`Builder::merge_chunk_bytes`](crate::Builder::merge_chunk_bytes) takes.
pub(crate) const MIN_RANGE_BYTES: u64 = 1 << 10;

/// The largest range it takes: a merge step of 64 MiB holds the server about 0.3 s.
pub(crate) const MAX_RANGE_BYTES: u64 = 64 << 20;

/// Bytes of ranges in flight at once for one batch (at least one range): what it holds here
/// (each range's bitmap, its command and the bytes from before), and how long the last range
/// sent waits behind the others on the server (about 5 ns per byte: 80 ms).
pub(crate) const RANGES_IN_FLIGHT_BYTES: u64 = 16 << 20;

/// The most offsets a merge by ranges takes at once from the batches waiting for a key (the
/// first batch always goes, however large): what the merge holds here, about 4 bytes per
/// offset ([`Grouped`]).
pub(crate) const MAX_PASS_OFFSETS: usize = 1 << 24;

/// Batches of similar size a merge may gather (a CLI `load` keeps 8 in flight): a batch worth
/// merging by ranges with that many more waits for the merge; a smaller one goes by `BITFIELD`.
pub(crate) const GATHER: u64 = 8;

/// How long a pass by ranges waits for more batches when those waiting do not pay for it:
/// about a tenth of what their offsets would cost the server by `BITFIELD` (0.3 µs each), at
/// most [`MAX_GATHER_WAIT`]. (A CLI `load` brings a batch every few tens of ms; a lone batch of
/// 1,000 go-zero items waits 0.4 ms, one of 200,000 about 84 ms.)
pub(crate) fn gather_wait(offsets: usize) -> std::time::Duration {
    std::time::Duration::from_nanos(offsets as u64 * 30).min(MAX_GATHER_WAIT)
}

/// The longest wait of [`gather_wait`].
const MAX_GATHER_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Bytes of a merge by ranges that one bit by `BITFIELD` is worth. `BITFIELD ... SET u1` costs
/// the server 0.28 µs per bit on an idle machine (0.65 µs on a busy one), and the client about
/// 30 bytes of arguments; a merge costs the server 4 to 7 ns per byte of the ranges it touches
/// (each range passes through Lua twice) and the client a few copies of them. Break-even: about
/// 60 bytes per bit idle, over 100 busy (BENCHMARKS.md, "Bulk loads at any size").
const WRITE_BYTES_PER_BIT: u64 = 64;

/// The same for reads: `BITFIELD_RO` about 0.25 µs per bit on the server; `GETRANGE` about 0.3
/// to 0.7 ns per byte there and a copy here (break-even near 250 bytes per bit).
const READ_BYTES_PER_BIT: u64 = 128;

/// Expected bytes of the ranges (of `range` bytes, over a key of `bytes`) that `offsets`
/// uniformly spread offsets touch.
fn touched_bytes(bytes: u64, range: u64, offsets: u64) -> f64 {
    let ranges = bytes.div_ceil(range) as f64;
    let untouched = (-(offsets as f64) / ranges).exp();
    (ranges * (1.0 - untouched) * range.min(bytes) as f64).min(bytes as f64)
}

/// Whether merging `offsets` offsets into a key of `bytes` bytes by ranges of `range` bytes
/// costs less than setting them by `BITFIELD`.
pub(crate) fn merge_by_ranges(bytes: u64, range: u64, offsets: u64) -> bool {
    ranges_pay(bytes, range, offsets, WRITE_BYTES_PER_BIT)
}

/// Whether a pass by ranges (of `range` bytes, over keys of `bytes` bytes in all) for `offsets`
/// offsets costs less than the alternative, which costs `bytes_per_bit` bytes of the ranges
/// they touch per offset.
pub(crate) fn ranges_pay(bytes: u64, range: u64, offsets: u64, bytes_per_bit: u64) -> bool {
    offsets as f64 * bytes_per_bit as f64 >= touched_bytes(bytes, range, offsets)
}

/// [`WRITE_BYTES_PER_BIT`] when each write records its answers across retries (exact
/// answers): a batch not merged goes as recorded scripts, whose `BITFIELD` costs the server
/// about 1.3 µs per bit (the offsets pass into Lua and the old bits back: 432 scripts of 2,314
/// native items, 21 ms each, for 1,000,000 items into a 120 MB key), against 6.6-9 ns per byte
/// of a recorded range: break-even near 140-200 bytes per bit. With the raw break-even, the
/// CLI's batches (16 MiB of items then: about 200,000 short lines) went by those scripts into
/// keys past about 90 MB, 1.2-1.8x slower than by ranges, each script holding the server 13-21
/// ms (BENCHMARKS.md, "Recorded loads into large filters").
const RECORDED_WRITE_BYTES_PER_BIT: u64 = 128;

/// [`merge_by_ranges`] for a write whose answers are recorded across retries, against
/// recorded `BITFIELD` scripts.
pub(crate) fn recorded_merge_by_ranges(bytes: u64, range: u64, offsets: u64) -> bool {
    ranges_pay(bytes, range, offsets, RECORDED_WRITE_BYTES_PER_BIT)
}

/// Whether reading the ranges that `offsets` offsets touch costs less than `BITFIELD_RO`.
pub(crate) fn read_by_ranges(bytes: u64, range: u64, offsets: u64) -> bool {
    ranges_pay(bytes, range, offsets, READ_BYTES_PER_BIT)
}

/// A batch's offsets grouped by the range of the key each falls in, in batch order within a
/// range, each with its item: what a merge or read by ranges needs, about 4 bytes per offset.
///
/// Each entry is one 32-bit word: the offset's bit within its range (the high `shift` bits)
/// and the item's distance from the previous entry's item in the same range (the low
/// `32 - shift` bits; items only grow within a range). A distance too large for its field is
/// written as the field's largest value, and the item itself follows in a word of its own: at
/// the default range of 128 KiB the field holds up to 4,094, so a batch whose items touch
/// most ranges (those that pay for a pass) needs almost no second words.
#[derive(Debug)]
pub(crate) struct Grouped {
    items: usize,
    offsets: usize,
    /// log2 of the bits per range (ranges are a power of two bytes, at most 64 MiB: 29).
    shift: u32,
    /// Where each range's words start in `words`; one more for the end.
    starts: Vec<u32>,
    /// The entries, range after range.
    words: Vec<u32>,
}

impl Grouped {
    /// Groups `offsets` (`hashes` per item, each below `bits`, at most 2^32) by ranges of
    /// `range_bytes`, a power of two; `None` for a batch of 2^32 offsets or more.
    #[cfg(test)]
    pub(crate) fn new(offsets: &[u32], hashes: usize, bits: u64, range_bytes: u64) -> Option<Self> {
        let shift = (range_bytes * 8).trailing_zeros();
        Self::with_ranges(
            offsets,
            hashes,
            shift,
            bits.div_ceil(range_bytes * 8) as usize,
        )
    }

    /// Groups `offsets` (`hashes` per item, each below `bits`, at most 2^32) by ranges of
    /// `range_bytes`, a power of two; `None` for a batch of 2^32 offsets or more, or an offset
    /// of 2^32 or more.
    pub(crate) fn of(offsets: &[u64], hashes: usize, bits: u64, range_bytes: u64) -> Option<Self> {
        let shift = (range_bytes * 8).trailing_zeros();
        let narrow = offsets
            .iter()
            .map(|&offset| u32::try_from(offset).ok().filter(|&o| u64::from(o) < bits))
            .collect::<Option<Vec<u32>>>()?;
        Self::with_ranges(
            &narrow,
            hashes,
            shift,
            bits.div_ceil(range_bytes * 8) as usize,
        )
    }

    /// [`new`](Grouped::new) for `ranges` ranges of `2^shift` bits; every offset below
    /// `ranges << shift`.
    pub(crate) fn with_ranges(
        offsets: &[u32],
        hashes: usize,
        shift: u32,
        ranges: usize,
    ) -> Option<Self> {
        let hashes = hashes.max(1);
        let items = offsets.len() / hashes;
        if u32::try_from(offsets.len()).is_err() {
            return None;
        }
        let distance_bits = 32 - shift;
        let far = (1u32 << distance_bits) - 1;
        // Words per range (one more for each item too far from the one before), then where
        // each range starts.
        let mut starts = vec![0u32; ranges + 1];
        let mut last = vec![0u32; ranges];
        for (item, offsets) in offsets.chunks(hashes).enumerate() {
            let item = item as u32;
            for &offset in offsets {
                let r = (offset >> shift) as usize;
                let words = if item - last[r] < far { 1 } else { 2 };
                starts[r + 1] = starts[r + 1].checked_add(words)?;
                last[r] = item;
            }
        }
        for r in 0..ranges {
            starts[r + 1] = starts[r + 1].checked_add(starts[r])?;
        }
        let mut next = starts.clone();
        last.fill(0);
        let mut words = vec![0u32; starts[ranges] as usize];
        let in_range = (1u32 << shift) - 1;
        for (item, offsets) in offsets.chunks(hashes).enumerate() {
            let item = item as u32;
            for &offset in offsets {
                let r = (offset >> shift) as usize;
                let slot = &mut next[r];
                let bit = (offset & in_range) << distance_bits;
                let distance = item - last[r];
                if distance < far {
                    words[*slot as usize] = bit | distance;
                    *slot += 1;
                } else {
                    words[*slot as usize] = bit | far;
                    words[*slot as usize + 1] = item;
                    *slot += 2;
                }
                last[r] = item;
            }
        }
        Some(Grouped {
            items,
            offsets: offsets.len(),
            shift,
            starts,
            words,
        })
    }

    /// Items of the batch.
    pub(crate) fn items(&self) -> usize {
        self.items
    }

    /// Offsets of the batch.
    pub(crate) fn offsets(&self) -> usize {
        self.offsets
    }

    /// Ranges of the key.
    pub(crate) fn ranges(&self) -> usize {
        self.starts.len() - 1
    }

    /// Range `r`'s entries, in batch order: each offset (in the key) and its item.
    fn range(&self, r: usize) -> Entries<'_> {
        Entries {
            words: &self.words[self.starts[r] as usize..self.starts[r + 1] as usize],
            distance_bits: 32 - self.shift,
            far: (1u32 << (32 - self.shift)) - 1,
            first_bit: (r as u64) << self.shift,
            item: 0,
        }
    }

    /// The first and last byte of range `r` that hold one of the batch's bits.
    pub(crate) fn span(&self, r: usize) -> Option<(u64, u64)> {
        let (mut lo, mut hi) = (u64::MAX, 0);
        for (offset, _) in self.range(r) {
            lo = lo.min(offset >> 3);
            hi = hi.max(offset >> 3);
        }
        (lo <= hi).then_some((lo, hi))
    }

    /// Clears `present[item]` for every item with a bit of range `r` that is 0 in `bytes`, the
    /// key's bytes from `first_byte` on (bits past their end are 0, as in Redis).
    pub(crate) fn mark_absent(
        &self,
        r: usize,
        first_byte: u64,
        bytes: &[u8],
        present: &mut [bool],
    ) {
        for (offset, item) in self.range(r) {
            if !test(bytes, offset - first_byte * 8) {
                present[item as usize] = false;
            }
        }
    }
}

/// The entries of one range of a [`Grouped`], decoded in order.
struct Entries<'a> {
    words: &'a [u32],
    distance_bits: u32,
    /// The distance that says the item follows in a word of its own.
    far: u32,
    /// The range's first bit in the key.
    first_bit: u64,
    /// The previous entry's item.
    item: u32,
}

impl Iterator for Entries<'_> {
    /// An offset in the key, and its item.
    type Item = (u64, u32);

    #[inline]
    fn next(&mut self) -> Option<(u64, u32)> {
        let (&word, rest) = self.words.split_first()?;
        let distance = word & self.far;
        let bit = u64::from(word >> self.distance_bits);
        if distance < self.far {
            self.item += distance;
            self.words = rest;
        } else {
            let (&item, rest) = rest.split_first()?;
            self.item = item;
            self.words = rest;
        }
        Some((self.first_bit + bit, self.item))
    }
}

/// One range of a merge of several batches (in order, as if one after the other): where the
/// range's bitmap goes in the key, from the first to the last byte that holds one of their
/// bits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RangeMerge {
    r: usize,
    /// Where the bitmap goes in the key, in bytes.
    pub(crate) first_byte: u64,
    /// The bitmap's length in bytes.
    len: usize,
}

impl RangeMerge {
    /// Range `r` of `batches` (all grouped with the same ranges), its bitmap written into
    /// `buffer` (all zeros, as long as a range; left so) and handed to `take`; `None` when no
    /// batch touches it.
    pub(crate) fn new<T>(
        batches: &[&Grouped],
        r: usize,
        buffer: &mut [u8],
        take: impl FnOnce(&[u8]) -> T,
    ) -> Option<(Self, T)> {
        let range_start = (r as u64) << batches.first()?.shift;
        let (mut lo, mut hi) = (usize::MAX, 0);
        for batch in batches {
            for (offset, _) in batch.range(r) {
                let bit = offset - range_start;
                let byte = (bit >> 3) as usize;
                buffer[byte] |= 0x80 >> (bit & 7);
                lo = lo.min(byte);
                hi = hi.max(byte);
            }
        }
        if lo > hi {
            return None;
        }
        let taken = take(&buffer[lo..=hi]);
        buffer[lo..=hi].fill(0);
        let merge = RangeMerge {
            r,
            first_byte: range_start / 8 + lo as u64,
            len: hi - lo + 1,
        };
        Some((merge, taken))
    }

    /// The range's number in the key.
    pub(crate) fn r(&self) -> usize {
        self.r
    }

    /// Marks new (`new[batch][item]`) every item of `batches` one of whose bits of this range
    /// was 0 in `old` (the key's bytes from before at `first_byte` on) and not set by an item
    /// before it: as sequential `SETBIT`s of the batches' offsets would report it.
    pub(crate) fn mark_new(&self, batches: &[&Grouped], mut old: Vec<u8>, new: &mut [Vec<bool>]) {
        old.resize(self.len, 0);
        let first_bit = self.first_byte * 8;
        for (batch, new) in batches.iter().zip(new) {
            for (offset, item) in batch.range(self.r) {
                let bit = offset - first_bit;
                let (byte, mask) = ((bit >> 3) as usize, 0x80 >> (bit & 7));
                // Without a branch: whether the bit was set is as good as random.
                let flipped = old[byte] & mask == 0;
                old[byte] |= mask;
                new[item as usize] |= flipped;
            }
        }
    }
}

/// Whether a batch outweighs the bytes a pass over whole keys moves: its `units` (the bits,
/// counters or words it would otherwise send one by one, by commands or per-item scripts) at
/// `bytes_per_unit` bytes each reach `bytes`. Every kind takes its dense path by this test, at
/// the price its own alternative measured: a plain filter's bits at [`WRITE_BYTES_PER_BIT`] and
/// [`READ_BYTES_PER_BIT`], a window's at 256 bytes, counters at 64 and 128, a growing filter's
/// words at 256 (checks) and its items at 4 KiB (adds). (With ranges instead of whole keys:
/// [`ranges_pay`].)
pub(crate) fn outweighs(units: u64, bytes_per_unit: u64, bytes: u64) -> bool {
    units.saturating_mul(bytes_per_unit) >= bytes
}

/// The units (bits, counters) of a batch of `items` items with `per_item` each: what
/// [`outweighs`] weighs.
pub(crate) fn units_of(items: usize, per_item: u32) -> u64 {
    (items as u64).saturating_mul(u64::from(per_item))
}

/// Whether adding a batch of `items` items with `hashes` bits each is cheaper dense than as
/// `BITFIELD` on a filter of `bits` bits: the filter is at most [`MAX_BYTES`] and the batch
/// outweighs it ([`outweighs`]). A pass over the whole filter is priced as a pass by ranges
/// is: it costs the server less per byte (0.3 ms for a 1.4 MB merge), but the client moves
/// the filter whole. At 8 bytes a bit (each bit's 30 bytes of arguments against the
/// filter's), batches of 5,000 to 30,000 go-zero items into a 4 MiB filter went by
/// `BITFIELD`, 10x slower to add and check than whole (BENCHMARKS.md, "Whole passes priced as
/// ranges").
pub(crate) fn worth_it(bits: u64, items: usize, hashes: u32) -> bool {
    let bytes = bits.div_ceil(8);
    bytes <= MAX_BYTES && outweighs(units_of(items, hashes), WRITE_BYTES_PER_BIT, bytes)
}

/// Whether checking such a batch is cheaper by reading the filter: at most [`MAX_READ_BYTES`],
/// and the batch outweighs it.
pub(crate) fn read_worth_it(bits: u64, items: usize, hashes: u32) -> bool {
    let bytes = bits.div_ceil(8);
    bytes <= MAX_READ_BYTES && outweighs(units_of(items, hashes), READ_BYTES_PER_BIT, bytes)
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

/// Items per bulk add: large enough to take the dense path (whole, or by ranges past
/// [`MAX_BYTES`]).
///
/// Past [`MAX_BYTES`], sixteen times the items whose bits alone pay for a pass over the whole
/// key: with exact answers across retries each batch passes over the key alone (its ranges'
/// records are its own, so batches are not gathered), and a load of 1,000,000 items into a
/// 4.8 MB key took 0.84 s in batches of four times (23 passes) and 0.34 s in batches of sixteen
/// (0.19 s without exact answers, which gather batches either way; BENCHMARKS.md).
pub(crate) fn add_batch_size(bits: u64, hashes: u32) -> usize {
    batch_size(bits, hashes, MAX_BYTES, WRITE_BYTES_PER_BIT as f64 / 4.0)
}

/// Items per bulk check: large enough to read the filter whole (up to [`MAX_BYTES`]) or by
/// the ranges the batch touches.
pub(crate) fn check_batch_size(bits: u64, hashes: u32) -> usize {
    batch_size(bits, hashes, MAX_BYTES, READ_BYTES_PER_BIT as f64)
}

fn batch_size(bits: u64, hashes: u32, max_bytes: u64, per_bit: f64) -> usize {
    let bytes = bits.div_ceil(8);
    let k = u64::from(hashes);
    if bytes <= max_bytes {
        // Large enough that a load passes over the filter seldom: a bit per 4 bytes of the
        // filter (16 times the bits that pay for a pass of an add, 32 for a check).
        (bytes.div_ceil(8 * k) * 2).clamp(1_000, 1_000_000) as usize
    } else {
        // Four times the items whose bits alone pay for a pass over the whole key, so that a
        // batch pays by itself however its neighbours fall.
        ((bytes as f64 / (per_bit * k as f64) * 4.0) as u64).clamp(1_000, 1_000_000) as usize
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
    fn a_batch_outweighs_the_bytes_from_its_price_on() {
        assert!(outweighs(1_000, 64, 64_000) && !outweighs(999, 64, 64_000));
        assert!(outweighs(u64::MAX, 256, u64::MAX), "no overflow");
        // A filter of 1,000,000 bits (125,000 bytes), 14 bits an item: whole from 140 items
        // (140 * 14 * 64 = 125,440 bytes) for an add, from 70 for a check (at 128).
        assert!(worth_it(1_000_000, 140, 14) && !worth_it(1_000_000, 139, 14));
        assert!(read_worth_it(1_000_000, 70, 14) && !read_worth_it(1_000_000, 69, 14));
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
        assert!(
            !read_worth_it(1024 * mib, 10_000_000, 14),
            "past MAX_READ_BYTES"
        );
        assert!(read_worth_it(64 * mib, 1_000_000, 14) && !read_worth_it(64 * mib, 10_000, 14));
        let batch = add_batch_size(11_000_000, 14);
        assert!(worth_it(11_000_000, batch, 14) && worth_it(11_000_000, batch / 2, 14));
        assert!(
            check_batch_size(64 * mib, 14) > 100_000,
            "checks read 64 MiB by ranges"
        );
    }

    #[test]
    fn large_filters_go_by_ranges_for_batches_that_outweigh_them() {
        let mib = 1 << 20;
        let range = RANGE_BYTES;
        // A 512 MiB key: two million go-zero items pay for a pass; a thousand do not.
        assert!(merge_by_ranges(512 * mib, range, 28_000_000));
        assert!(!merge_by_ranges(512 * mib, range, 14_000));
        // tests/large_batches.rs: 60,000 items on 128 MiB stay BITFIELD commands.
        assert!(!merge_by_ranges(128 * mib, range, 60_000 * 14));
        assert!(read_by_ranges(512 * mib, range, 14_000_000));
        assert!(!read_by_ranges(512 * mib, range, 14_000));
        // Sparse batches touch a part of the ranges only.
        assert!(touched_bytes(512 * mib, range, 10) <= 10.0 * range as f64);
        assert!(touched_bytes(512 * mib, range, 100_000_000) > 511.0 * mib as f64);
        // Batch sizes: large enough for a batch alone to pay a pass.
        for bytes in [5 * mib, 23 * mib, 128 * mib] {
            let items = add_batch_size(bytes * 8, 14) as u64;
            assert!(merge_by_ranges(bytes, range, items * 14), "{bytes}");
            let items = check_batch_size(bytes * 8, 14) as u64;
            assert!(read_by_ranges(bytes, range, items * 14), "{bytes}");
        }
        assert_eq!(add_batch_size(4 << 35, 14), 1_000_000);
    }

    #[test]
    fn grouped_offsets_keep_batch_order_within_each_range() {
        // Ranges of 1 KiB = 8192 bits; 2 items of 3 bits.
        let offsets = [9000u32, 5, 8192, 7, 9000, 20000];
        let g = Grouped::new(&offsets, 3, 3 * 8192, 1024).unwrap();
        assert_eq!((g.items(), g.offsets(), g.ranges()), (2, 6, 3));
        let range = |r| -> Vec<(u64, u32)> { g.range(r).collect() };
        assert_eq!(range(0), [(5, 0), (7, 1)]);
        assert_eq!(range(1), [(9000, 0), (8192, 0), (9000, 1)]);
        assert_eq!(range(2), [(20000, 1)]);
        assert_eq!(g.span(0), Some((0, 0)));
        assert_eq!(g.span(1), Some((1024, 1125)));
        let mut present = vec![true; 2];
        // Range 1 read from byte 1024 on: bit 8192 set, 9000 not.
        g.mark_absent(1, 1024, &[0x80], &mut present);
        assert_eq!(present, [false, false]);
    }

    #[test]
    fn grouped_entries_keep_far_items_and_every_range_size() {
        // Ranges from the smallest (1 KiB: 19 bits of distance between items) to the largest
        // (64 MiB: 3 bits). Range 0 holds items a million apart (a second word each, at every
        // size), range 1 every 997th item at random bits, range 3 every item twice.
        for range_bytes in [MIN_RANGE_BYTES, RANGE_BYTES, MAX_RANGE_BYTES] {
            let range_bits = range_bytes * 8;
            let hashes = 2;
            let mut offsets: Vec<u32> = Vec::new();
            let mut want: Vec<Vec<(u64, u32)>> = vec![Vec::new(); 4];
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            for item in 0..3_000_000u32 {
                let pair = if item % 1_000_000 == 999_999 {
                    [5, range_bits - 1]
                } else if item % 997 == 0 {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    [range_bits + state % range_bits, 3 * range_bits + 1]
                } else {
                    [3 * range_bits, 4 * range_bits - 1]
                };
                for offset in pair {
                    offsets.push(offset as u32);
                    want[(offset / range_bits) as usize].push((offset, item));
                }
            }
            let g = Grouped::new(&offsets, hashes, 4 * range_bits, range_bytes).unwrap();
            assert_eq!(
                (g.items(), g.offsets(), g.ranges()),
                (3_000_000, 6_000_000, 4)
            );
            for (r, want) in want.iter().enumerate() {
                assert_eq!(
                    g.range(r).collect::<Vec<_>>(),
                    *want,
                    "range {r} of {range_bytes}"
                );
            }
            assert_eq!(g.span(0), Some((0, range_bytes - 1)));
            let seconds = g.words.len() - offsets.len();
            assert!((3..7_000).contains(&seconds), "{seconds} second words");
        }
    }

    #[test]
    fn a_merge_by_ranges_sets_the_bits_and_tells_new_as_sequential_setbits_do() {
        let bits = 4 * 8192;
        let range = 1024;
        let items: Vec<String> = (0..300).map(|i| format!("item:{}", i % 250)).collect();
        let old_items: Vec<String> = (0..100).map(|i| format!("item:{}", i * 3)).collect();
        let hashes = 14;
        let locate = |items: &[String]| -> Vec<u64> {
            items
                .iter()
                .flat_map(|item| crate::gozero_locations(item.as_bytes(), bits))
                .collect()
        };
        let (first, second) = items.split_at(120);
        let (first, second) = (locate(first), locate(second));
        let old = bitmap(&locate(&old_items));
        let want = new_flags(
            old.clone(),
            &[first.clone(), second.clone()].concat(),
            hashes,
        );
        let mut want_bytes = old.clone();
        for &offset in first.iter().chain(&second) {
            want_bytes.resize(want_bytes.len().max(offset as usize / 8 + 1), 0);
            set(&mut want_bytes, offset);
        }
        let narrow = |offsets: &[u64]| -> Vec<u32> { offsets.iter().map(|&o| o as u32).collect() };
        let a = Grouped::new(&narrow(&first), hashes, bits, range).unwrap();
        let b = Grouped::new(&narrow(&second), hashes, bits, range).unwrap();
        let mut key = old;
        let mut new = vec![vec![false; a.items()], vec![false; b.items()]];
        let mut buffer = vec![0u8; range as usize];
        let batches = [&a, &b];
        for r in 0..a.ranges() {
            let made = RangeMerge::new(&batches, r, &mut buffer, <[u8]>::to_vec);
            let Some((merge, bitmap)) = made else {
                continue;
            };
            assert!(buffer.iter().all(|&b| b == 0), "the buffer is left zeroed");
            // What merge_range.lua does: GETRANGE, OR, SETRANGE.
            let start = merge.first_byte as usize;
            let end = start + bitmap.len();
            let before = key
                .get(start..end.min(key.len()))
                .unwrap_or_default()
                .to_vec();
            key.resize(key.len().max(end), 0);
            for (byte, add) in key[start..end].iter_mut().zip(&bitmap) {
                *byte |= add;
            }
            merge.mark_new(&batches, before, &mut new);
        }
        assert_eq!(key, want_bytes, "the same bytes as SETBITs");
        assert_eq!(new.concat(), want, "the same answers as SETBITs");
        assert!(want.contains(&false) && want.contains(&true));
    }
}
