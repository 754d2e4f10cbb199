//! Many items into (or against) an offline filter's bits at once ([`OfflineBloom::add_batch`],
//! [`OfflineBloom::exists_batch`]): the items
//! hashed on every core, their bit offsets grouped by region of the bits ([`REGION_SHIFT`],
//! a core's L2 cache), then each region's bits set by one core while the region stays in
//! cache. A filter far larger than the caches is then set at the speed of its caches, not of
//! its memory's random access.
//!
//! A region is read through once, line by line, before its offsets are set when they are
//! dense enough ([`TOUCHED_FROM`]): the hardware streams it into the cache at the memory's
//! bandwidth instead of missing at each offset. A hit (an offset and its item) takes 4 bytes:
//! the offset in its region (21 bits) and the item's distance from the region's last one.
//!
//! The answers are those of adding the items one by one, in order: each region's offsets are
//! set in the items' order (the cores' chunks are the items' order too), so a bit's first
//! setter is the first item in order that holds it, and an item is new when it was the first
//! setter of one of its bits.
//!
//! A check is the same walk without the writes: an item is absent when one of its bits is not
//! set.
//!
//! [`OfflineBloom::add_batch`]: super::OfflineBloom::add_batch
//! [`OfflineBloom::exists_batch`]: super::OfflineBloom::exists_batch

use crate::geometry::Geometry;
use crate::hash::ItemHash;
use std::thread;
use strength_reduce::StrengthReducedU64;

/// Bits per region, as a shift: 2^21 bits, 256 KiB.
const REGION_SHIFT: u32 = 21;

/// A bit's offset within its region.
const REGION_MASK: u64 = (1 << REGION_SHIFT) - 1;

/// Fewer items than this go one by one on the calling thread: grouping would cost more than
/// it saves.
pub(super) const GROUPED_FROM: usize = 4_096;

/// One item's bit in one region: `gap << REGION_SHIFT | offset`, where `gap` is how far the
/// item's index in the batch is past the previous hit's in the region (the first's: past the
/// thread's first item), and `offset` the bit's in the region. A gap of [`SKIP`] or more goes
/// as hits of gap [`SKIP`] that set nothing, then the rest.
type Hit = u32;

/// The gap of a hit that only moves the item index on.
const SKIP: u32 = (1 << (32 - REGION_SHIFT)) - 1;

/// A region is read through first when it has at least one hit for this many cache lines.
const TOUCHED_FROM: usize = 4;

/// What [`add`] keeps between batches: each thread's hits grouped by region, and each
/// region thread's "new" flags, reused so that a batch pays no page faults for them.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// Per hashing thread: the index of its first item, and its hits by region.
    grouped: Vec<(u32, Vec<Vec<Hit>>)>,
    flags: Vec<Vec<u8>>,
}

/// Sets (`write`) or only tests the bits of the items of `items` at `ids` in `bits` (a filter
/// of `geometry`, grown to its whole size first), on up to `threads` threads; `new[id]` is set
/// for each item one of whose bits was not set before (when writing: that it was the first to
/// set): a new item, or an absent one.
pub(super) fn run<T: AsRef<[u8]> + Sync>(
    geometry: &Geometry,
    bits: &mut Vec<u8>,
    (items, ids): (&[T], &[u32]),
    threads: usize,
    (scratch, write): (&mut Scratch, bool),
    new: &mut [bool],
) {
    let full = usize::try_from(geometry.max_bytes()).expect("a filter held in memory");
    if bits.len() < full {
        bits.resize(full, 0);
    }
    let regions = full.div_ceil(1 << (REGION_SHIFT - 3));
    let reducer = StrengthReducedU64::new(geometry.bits);
    let threads = threads.clamp(1, ids.len().max(1));
    let per_thread = ids.len().div_ceil(threads).max(1);
    let chunks = ids.chunks(per_thread);
    scratch.grouped.resize_with(chunks.len(), Default::default);
    // Each thread's hits, grouped by region, for its chunk of the items in order.
    thread::scope(|scope| {
        for (grouped, chunk) in scratch.grouped.iter_mut().zip(chunks) {
            let reducer = &reducer;
            scope.spawn(move || {
                grouped.0 = chunk[0];
                group(geometry, reducer, items, chunk, regions, &mut grouped.1);
            });
        }
    });
    let region_bytes = 1usize << (REGION_SHIFT - 3);
    let mut slices: Vec<(usize, &mut [u8])> =
        bits[..full].chunks_mut(region_bytes).enumerate().collect();
    let per_thread = slices.len().div_ceil(threads).max(1);
    let shares = slices.chunks_mut(per_thread);
    scratch.flags.resize_with(shares.len(), Vec::new);
    let grouped = &scratch.grouped;
    thread::scope(|scope| {
        for (share, flags) in shares.zip(scratch.flags.iter_mut()) {
            flags.clear();
            flags.resize(new.len(), 0);
            scope.spawn(move || {
                for (region, slice) in share.iter_mut() {
                    let hits: usize = grouped.iter().map(|(_, g)| g[*region].len()).sum();
                    if hits * TOUCHED_FROM >= slice.len() / 64 {
                        touch(slice);
                    }
                    for (first, chunk) in grouped {
                        match write {
                            true => set::<true>(slice, *first, &chunk[*region], flags),
                            false => set::<false>(slice, *first, &chunk[*region], flags),
                        }
                    }
                }
            });
        }
    });
    for flags in &scratch.flags {
        for (new, &flag) in new.iter_mut().zip(flags) {
            *new |= flag != 0;
        }
    }
}

/// The hits of the items at `ids`, grouped by region into `grouped` (emptied first), in the
/// items' order within each.
fn group<T: AsRef<[u8]>>(
    geometry: &Geometry,
    reducer: &StrengthReducedU64,
    items: &[T],
    ids: &[u32],
    regions: usize,
    grouped: &mut Vec<Vec<Hit>>,
) {
    let hashes = geometry.hashes as usize;
    // Room for the expected share of each region, and a margin: few regions grow once.
    let expected = ids.len() * hashes / regions;
    let room = expected + expected / 8 + 16;
    grouped.resize_with(regions, Vec::new);
    for region in grouped.iter_mut() {
        region.clear();
        region.reserve(room);
    }
    let mut offsets = Vec::with_capacity(hashes);
    // Per region, the index of the item of its last hit.
    let mut last = vec![ids.first().copied().unwrap_or(0); regions];
    for &id in ids {
        offsets.clear();
        offsets_of(geometry, reducer, items[id as usize].as_ref(), &mut offsets);
        for &offset in &offsets {
            let region = (offset >> REGION_SHIFT) as usize;
            let hits = &mut grouped[region];
            let mut gap = id - last[region];
            while gap >= SKIP {
                hits.push(SKIP << REGION_SHIFT);
                gap -= SKIP;
            }
            hits.push(gap << REGION_SHIFT | (offset & REGION_MASK) as u32);
            last[region] = id;
        }
    }
}

/// The bit offsets of `item`, as [`Geometry::push_offsets`] computes them, with the filter's
/// size as a divisor reduced once (a multiplication, not a division, per offset).
fn offsets_of(geometry: &Geometry, reducer: &StrengthReducedU64, item: &[u8], out: &mut Vec<u64>) {
    match ItemHash::of(item, geometry.layout) {
        ItemHash::GoZero(hashes) => out.extend(hashes.iter().map(|&h| h % *reducer)),
        ItemHash::Native(h1, h2) => out.extend(
            (0..u64::from(geometry.hashes)).map(|i| h1.wrapping_add(i.wrapping_mul(h2)) % *reducer),
        ),
    }
}

/// Reads `region` through, a byte per cache line: the hardware streams it into the cache.
fn touch(region: &[u8]) {
    let mut sum = 0u8;
    for line in region.chunks(64) {
        sum ^= line[0];
    }
    std::hint::black_box(sum);
}

/// Sets (`WRITE`) each hit's bit in `region` (the hits of a thread whose first item is
/// `first`), flagging the item (non-zero) where the bit was not set; no branch on the bit,
/// which is set about half the time in a filter filling up.
fn set<const WRITE: bool>(region: &mut [u8], first: u32, hits: &[Hit], flags: &mut [u8]) {
    let mut id = first as usize;
    for &hit in hits {
        let gap = hit >> REGION_SHIFT;
        id += gap as usize;
        if gap == SKIP {
            continue;
        }
        let bit = hit & REGION_MASK as u32;
        let byte = (bit >> 3) as usize;
        let mask = 0x80u8 >> (bit & 7);
        let old = region[byte];
        if WRITE {
            region[byte] = old | mask;
        }
        flags[id] |= !old & mask;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Layout;

    #[test]
    fn reduced_offsets_are_the_geometrys() {
        let mut checked = 0;
        for layout in [Layout::Native, Layout::GoZero] {
            for bits in [
                1u64,
                7,
                1 << 20,
                (1 << 33) + 12_345,
                u64::from(u32::MAX) * 3,
            ] {
                let Ok(geometry) = Geometry::new(layout, bits, 14) else {
                    continue;
                };
                checked += 1;
                let reducer = StrengthReducedU64::new(bits);
                for i in 0..200u32 {
                    let item = format!("item {i}");
                    let (mut want, mut got) = (Vec::new(), Vec::new());
                    geometry.push_offsets(&ItemHash::of(item.as_bytes(), layout), &mut want);
                    offsets_of(&geometry, &reducer, item.as_bytes(), &mut got);
                    assert_eq!(got, want, "{layout:?} {bits}");
                }
            }
        }
        assert!(checked >= 6, "{checked} geometries");
    }

    /// Items far apart in the batch (a gap past [`SKIP`], as a shard's or a sparse region's
    /// can be) still flag and set what adds one by one would.
    #[test]
    fn hits_far_apart_keep_their_items() {
        let geometry = Geometry::new(Layout::Native, 1 << 16, 7).unwrap();
        let reducer = StrengthReducedU64::new(geometry.bits);
        let items: Vec<String> = (0..20_000)
            .map(|i| format!("item {}", i % 10_001))
            .collect();
        let ids = [3u32, 2_000, 2_100, 9_000, 10_004, 19_999];
        let mut grouped = Vec::new();
        group(&geometry, &reducer, &items, &ids, 1, &mut grouped);
        assert!(grouped[0].iter().any(|&hit| hit >> REGION_SHIFT == SKIP));
        let (mut region, mut flags) = (vec![0u8; 1 << 13], vec![0u8; items.len()]);
        set::<true>(&mut region, ids[0], &grouped[0], &mut flags);
        let mut want = vec![0u8; 1 << 13];
        for &id in &ids {
            let mut offsets = Vec::new();
            geometry.push_offsets(
                &ItemHash::of(items[id as usize].as_bytes(), Layout::Native),
                &mut offsets,
            );
            let mut new = false;
            for offset in offsets {
                let (byte, mask) = ((offset / 8) as usize, 0x80u8 >> (offset & 7));
                new |= want[byte] & mask == 0;
                want[byte] |= mask;
            }
            // Item 10,004 is item 3 again: seen.
            assert_eq!(flags[id as usize] != 0, new && id != 10_004, "item {id}");
        }
        assert_eq!(region, want);
        let flagged = flags.iter().filter(|&&f| f != 0).count();
        assert_eq!(flagged, ids.len() - 1);
    }
}
