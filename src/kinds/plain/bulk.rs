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

/// Sets (`write`) or only tests the bits of `items` in `parts` (a filter's shards: each
/// one's shape and bits, grown to its whole size first), on up to `threads` threads; `new[i]`
/// is set for each item one of whose bits was not set before (when writing: that it was the
/// first to set): a new item, or an absent one. Each thread takes a run of the items in order
/// and hashes each once for its shard and its bits; the regions of every shard are then
/// shared out among the threads.
pub(super) fn run<T: AsRef<[u8]> + Sync>(
    parts: &mut [(Geometry, Vec<u8>)],
    items: &[T],
    threads: usize,
    (scratch, write): (&mut Scratch, bool),
    new: &mut [bool],
) {
    let region_bytes = 1usize << (REGION_SHIFT - 3);
    // Each shard's regions are numbered after those of the shards before it.
    let mut shards = Vec::with_capacity(parts.len());
    let mut regions = 0;
    for (geometry, bits) in parts.iter_mut() {
        let full = usize::try_from(geometry.max_bytes()).expect("a filter held in memory");
        if bits.len() < full {
            bits.resize(full, 0);
        }
        shards.push(Shard {
            geometry: *geometry,
            reducer: StrengthReducedU64::new(geometry.bits),
            first_region: regions,
        });
        regions += full.div_ceil(region_bytes);
    }
    let threads = threads.clamp(1, items.len().max(1));
    let per_thread = items.len().div_ceil(threads).max(1);
    let chunks = items.len().div_ceil(per_thread);
    scratch.grouped.resize_with(chunks, Default::default);
    // Each thread's hits, grouped by region, for its run of the items in order.
    thread::scope(|scope| {
        for (i, grouped) in scratch.grouped.iter_mut().enumerate() {
            let run = i * per_thread..((i + 1) * per_thread).min(items.len());
            let shards = &shards;
            scope.spawn(move || {
                grouped.0 = run.start as u32;
                group(shards, items, run, regions, &mut grouped.1);
            });
        }
    });
    let mut slices: Vec<(usize, &mut [u8])> = Vec::with_capacity(regions);
    for ((geometry, bits), shard) in parts.iter_mut().zip(&shards) {
        // (A copy read from Redis may hold bytes past the filter's size: never set or read.)
        let full = usize::try_from(geometry.max_bytes()).expect("a filter held in memory");
        let numbered = bits[..full].chunks_mut(region_bytes).enumerate();
        slices.extend(numbered.map(|(i, slice)| (shard.first_region + i, slice)));
    }
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

/// One shard of the filter, as [`group`] places items in it.
struct Shard {
    geometry: Geometry,
    /// The shard's size as a divisor, reduced once.
    reducer: StrengthReducedU64,
    /// The number of its first region among all shards' regions.
    first_region: usize,
}

/// The hits of the items of `run` (in `shards`: each item in its own, when there are several),
/// grouped by region (of all shards: `regions`) into `grouped` (emptied first), in the items'
/// order within each.
fn group<T: AsRef<[u8]>>(
    shards: &[Shard],
    items: &[T],
    run: std::ops::Range<usize>,
    regions: usize,
    grouped: &mut Vec<Vec<Hit>>,
) {
    let hashes: usize = shards
        .iter()
        .map(|s| s.geometry.hashes as usize)
        .max()
        .unwrap_or(0);
    // Room for the expected share of each region, and a margin: few regions grow once.
    let expected = run.len() * hashes / regions.max(1);
    let room = expected + expected / 8 + 16;
    grouped.resize_with(regions, Vec::new);
    for region in grouped.iter_mut() {
        region.clear();
        region.reserve(room);
    }
    let mut offsets = Vec::with_capacity(hashes);
    // Per region, the index of the item of its last hit.
    let mut last = vec![run.start as u32; regions];
    for id in run {
        let item = items[id].as_ref();
        let shard = match shards.len() {
            1 => &shards[0],
            n => &shards[crate::hash::shard_of(item, n as u32)],
        };
        offsets.clear();
        offsets_of(&shard.geometry, &shard.reducer, item, &mut offsets);
        let id = id as u32;
        for &offset in &offsets {
            let region = shard.first_region + (offset >> REGION_SHIFT) as usize;
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
    /// can be) still flag and set what adds one by one would: 1,024 shards of one region
    /// each, so that a region's hits are about 1,024 items apart, often more than [`SKIP`].
    #[test]
    fn hits_far_apart_keep_their_items() {
        let geometry = Geometry::new(Layout::Native, 1 << 16, 7).unwrap();
        let shards: Vec<Shard> = (0..1_024)
            .map(|first_region| Shard {
                geometry,
                reducer: StrengthReducedU64::new(geometry.bits),
                first_region,
            })
            .collect();
        let items: Vec<String> = (0..20_000)
            .map(|i| format!("item {}", i % 10_001))
            .collect();
        let mut grouped = Vec::new();
        group(&shards, &items, 0..items.len(), shards.len(), &mut grouped);
        assert!(grouped
            .iter()
            .flatten()
            .any(|&hit| hit >> REGION_SHIFT == SKIP));
        let mut flags = vec![0u8; items.len()];
        let mut got = vec![vec![0u8; 1 << 13]; shards.len()];
        for (region, bits) in got.iter_mut().enumerate() {
            set::<true>(bits, 0, &grouped[region], &mut flags);
        }
        let mut want = vec![vec![0u8; 1 << 13]; shards.len()];
        for (id, item) in items.iter().enumerate() {
            let bits = &mut want[crate::hash::shard_of(item.as_bytes(), 1_024)];
            let mut offsets = Vec::new();
            geometry.push_offsets(&ItemHash::of(item.as_bytes(), Layout::Native), &mut offsets);
            let mut new = false;
            for offset in offsets {
                let (byte, mask) = ((offset / 8) as usize, 0x80u8 >> (offset & 7));
                new |= bits[byte] & mask == 0;
                bits[byte] |= mask;
            }
            assert_eq!(flags[id] != 0, new, "item {id}");
            // Items past 10,000 are repeats (but item 10,000's first time).
            assert!(!new || id <= 10_000, "item {id} again");
        }
        assert_eq!(got, want);
    }
}
