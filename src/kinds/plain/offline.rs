//! A plain filter built in memory, without Redis (SPEC.md §5 `build`).

use super::Plain;
use crate::core::call::{self, Call};
use crate::core::kind::Cached;
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::hash::ItemHash;
use crate::layout::Layout;
use crate::snapshot::{
    strings::BITS, SectionHeader, SnapshotError, SnapshotHeader, SnapshotWriter, Transferred,
};
use crate::{Bloom, Builder};
use tokio::io::AsyncWrite;

/// A plain filter built in memory, without Redis (SPEC.md §5 `build`): the same bits as adds
/// to a filter with the same parameters, written as a snapshot that
/// [`RedisBloom::import`](crate::Bloom::import) puts in place. It holds the filter's bits in
/// memory (all shards), each shard's as long as its highest byte set.
///
/// ```
/// # async fn demo() -> redbloom::Result<()> {
/// let mut offline = redbloom::RedisBloom::builder("seen")
///     .expected_items(1_000)
///     .false_positive_rate(0.01)
///     .build_offline()?;
/// assert!(offline.add("a"));
/// assert!(!offline.add("a"));
/// assert!(offline.exists("a"));
/// let mut file = Vec::new();
/// offline.write_snapshot(&mut file).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct OfflineBloom {
    key: String,
    fingerprint: String,
    /// The whole filter's shape.
    geometry: Geometry,
    /// Each shard's shape and bits (as long as its highest byte set, as Redis would hold it).
    parts: Vec<(Geometry, Vec<u8>)>,
    /// Threads [`add_batch`](OfflineBloom::add_batch) uses at most.
    threads: usize,
    /// [`add_batch`](OfflineBloom::add_batch)'s buffers, kept for the next batch.
    scratch: super::bulk::Scratch,
}

impl Builder<Plain> {
    /// A plain filter with these parameters built in memory, without Redis:
    /// [`OfflineBloom`]. Its bits take `bits / 8` bytes here once full (nothing before).
    ///
    /// # Errors
    /// As for [`build`](Builder::build).
    pub fn build_offline(self) -> Result<OfflineBloom> {
        let made = self.made()?;
        let parts = made.parts.iter().map(|part| (part.geometry, Vec::new()));
        Ok(OfflineBloom::of(
            self.key,
            made.guard.fingerprint().to_owned(),
            made.kind.geometry,
            parts.collect(),
        ))
    }
}

impl<C: redis::aio::ConnectionLike + Clone + Send + Sync> Bloom<C, Plain> {
    /// Reads the filter's bits (every shard's) into memory: an [`OfflineBloom`] with this
    /// filter's parameters, whose [`exists_batch`](OfflineBloom::exists_batch) checks millions
    /// of items with no round trip, at the speed of the machine's cores. It holds every add
    /// acknowledged before the read began, and none made after it (it is a copy: adds to it
    /// stay in memory). It takes the filter's size in memory.
    ///
    /// The keys are read in pieces of at most 1 MiB (`GETRANGE`), each retried as a check
    /// is; a filter whose stored parameters say its keys exist, but whose keys are gone,
    /// fails with [`Error::Lost`](crate::Error::Lost), as a check does.
    ///
    /// ```no_run
    /// # async fn demo(seen: redbloom::RedisBloom<redis::aio::ConnectionManager>) -> redbloom::Result<()> {
    /// let urls: Vec<String> = (0..5_000_000).map(|i| format!("https://example.com/{i}")).collect();
    /// let mut copy = seen.read_offline().await?;
    /// let found = copy.exists_batch(&urls);
    /// println!("{} seen", found.iter().filter(|&&f| f).count());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As for [`exists_many`](Bloom::exists_many).
    pub async fn read_offline(&self) -> Result<OfflineBloom> {
        let core = &*self.0;
        call::run(Call::ReadOffline, core, None, async {
            let clock = core.exec.clock();
            let copy = <Plain as Cached>::read_copy(core.ctx(&clock, 0), u64::MAX).await?;
            let parts = core.parts.parts().iter().zip(copy.0);
            let parts = parts.map(|(part, mut bits)| {
                trim(&mut bits);
                (part.geometry, bits)
            });
            Ok(OfflineBloom::of(
                core.key.clone(),
                core.guard.fingerprint().to_owned(),
                core.kind.geometry,
                parts.collect(),
            ))
        })
        .await
    }
}

/// `bits` cut to their highest byte set, as Redis holds a filter's key and an offline filter
/// its parts.
fn trim(bits: &mut Vec<u8>) {
    let used = bits
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |last| last + 1);
    bits.truncate(used);
}

impl OfflineBloom {
    /// An offline filter of these parameters and parts' bits, using every core.
    fn of(
        key: String,
        fingerprint: String,
        geometry: Geometry,
        parts: Vec<(Geometry, Vec<u8>)>,
    ) -> Self {
        OfflineBloom {
            key,
            fingerprint,
            geometry,
            parts,
            threads: std::thread::available_parallelism().map_or(1, usize::from),
            scratch: super::bulk::Scratch::default(),
        }
    }

    /// Adds `item`; `true` when one of its bits was not set (certainly new), as
    /// [`RedisBloom::add`](crate::Bloom::add) answers.
    pub fn add(&mut self, item: impl AsRef<[u8]>) -> bool {
        let item = item.as_ref();
        let shard = crate::hash::shard_of(item, self.parts.len() as u32);
        let (geometry, bits) = &mut self.parts[shard];
        let mut offsets = Vec::with_capacity(geometry.hashes as usize);
        geometry.push_offsets(&ItemHash::of(item, geometry.layout), &mut offsets);
        let mut new = false;
        for offset in offsets {
            let byte = (offset / 8) as usize;
            if bits.len() <= byte {
                bits.resize(byte + 1, 0);
            }
            let mask = 0x80 >> (offset & 7);
            new |= bits[byte] & mask == 0;
            bits[byte] |= mask;
        }
        new
    }

    /// Adds every item of `items`, as [`add`](OfflineBloom::add) would one by one in order:
    /// how many were certainly new. A large batch is hashed on every core and its bits set
    /// region by region while each stays in the cache (`src/kinds/plain/bulk.rs`), many
    /// times faster than one by one for a filter larger than the caches; the filter then takes
    /// its whole size in memory at once. [`with_threads`](OfflineBloom::with_threads) bounds
    /// the cores used (all by default).
    ///
    /// ```
    /// let mut offline = redbloom::RedisBloom::builder("seen")
    ///     .expected_items(10_000)
    ///     .false_positive_rate(0.01)
    ///     .build_offline()?;
    /// let items: Vec<String> = (0..10_000).map(|i| format!("item {i}")).collect();
    /// let new = offline.add_batch(&items);
    /// assert!(new > 9_900);
    /// assert_eq!(offline.add_batch(&items), 0, "all present");
    /// assert!(offline.exists("item 42"));
    /// # Ok::<(), redbloom::Error>(())
    /// ```
    pub fn add_batch<T: AsRef<[u8]> + Sync>(&mut self, items: &[T]) -> u64 {
        if items.len() < super::bulk::GROUPED_FROM || u32::try_from(items.len()).is_err() {
            return items.iter().map(|item| u64::from(self.add(item))).sum();
        }
        let new = self.grouped(items, true);
        new.iter().filter(|&&n| n).count() as u64
    }

    /// Checks every item of `items`: one answer per item, in order, `true` where
    /// [`exists`](OfflineBloom::exists) would say `true`. A large batch goes as
    /// [`add_batch`](OfflineBloom::add_batch) does (hashed on every core, the bits read region
    /// by region), without writing: many times faster than one by one for a filter larger
    /// than the caches. It takes `&mut self` for its buffers; the bits are not changed.
    ///
    /// ```
    /// let mut offline = redbloom::RedisBloom::builder("seen")
    ///     .expected_items(10_000)
    ///     .false_positive_rate(0.01)
    ///     .build_offline()?;
    /// let items: Vec<String> = (0..10_000).map(|i| format!("item {i}")).collect();
    /// offline.add_batch(&items[..5_000]);
    /// let found = offline.exists_batch(&items);
    /// assert!(found[..5_000].iter().all(|&f| f));
    /// assert!(found[5_000..].iter().filter(|&&f| f).count() < 150);
    /// # Ok::<(), redbloom::Error>(())
    /// ```
    pub fn exists_batch<T: AsRef<[u8]> + Sync>(&mut self, items: &[T]) -> Vec<bool> {
        if items.len() < super::bulk::GROUPED_FROM || u32::try_from(items.len()).is_err() {
            return items.iter().map(|item| self.exists(item)).collect();
        }
        let mut found = self.grouped(items, false);
        for found in &mut found {
            *found = !*found;
        }
        found
    }

    /// `items` set (`write`) or tested by [`bulk::run`](super::bulk::run), every shard at
    /// once: per item, whether one of its bits was not set (new, or absent).
    fn grouped<T: AsRef<[u8]> + Sync>(&mut self, items: &[T], write: bool) -> Vec<bool> {
        let mut unset = vec![false; items.len()];
        let scratch = (&mut self.scratch, write);
        super::bulk::run(&mut self.parts, items, self.threads, scratch, &mut unset);
        for (_, bits) in &mut self.parts {
            trim(bits);
        }
        unset
    }

    /// Uses at most `threads` threads for [`add_batch`](OfflineBloom::add_batch) (at least
    /// one; all the machine's cores by default).
    #[must_use]
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// Whether `item` may have been added.
    pub fn exists(&self, item: impl AsRef<[u8]>) -> bool {
        let item = item.as_ref();
        let shard = crate::hash::shard_of(item, self.parts.len() as u32);
        let (geometry, bits) = &self.parts[shard];
        geometry.all(&ItemHash::of(item, geometry.layout), |offset| {
            crate::dense::test(bits, offset)
        })
    }

    /// The key the filter was built for.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The filter's size in bits (all shards together).
    pub fn bits(&self) -> u64 {
        self.geometry.bits
    }

    /// Bit locations per item.
    pub fn hashes(&self) -> u32 {
        self.geometry.hashes
    }

    /// How items map to bits.
    pub fn layout(&self) -> Layout {
        self.geometry.layout
    }

    /// How many keys the filter has.
    pub fn shards(&self) -> u32 {
        self.parts.len() as u32
    }

    /// Writes the filter as a snapshot file: what [`RedisBloom::export`](crate::Bloom::export)
    /// would write for the same adds.
    ///
    /// # Errors
    /// [`Error::Snapshot`] when writing fails.
    pub async fn write_snapshot<W: AsyncWrite + Unpin>(&self, out: W) -> Result<Transferred> {
        let header = SnapshotHeader::new(
            <Plain as crate::kind::Kind>::NAME.as_str(),
            self.fingerprint.clone(),
            self.parts.len() as u32,
        );
        let mut writer = SnapshotWriter::new(out, &header).await?;
        let mut filter_bytes = 0;
        for (i, (_, bits)) in self.parts.iter().enumerate() {
            writer
                .begin_section(&SectionHeader::new(i as u32, BITS, bits.len() as u64))
                .await?;
            writer.write(bits).await?;
            filter_bytes += bits.len() as u64;
        }
        let (mut out, file_bytes) = writer.finish_counted().await?;
        tokio::io::AsyncWriteExt::shutdown(&mut out)
            .await
            .map_err(|e| Error::Snapshot(SnapshotError::Io(e)))?;
        Ok(Transferred {
            file_bytes,
            filter_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{Layout, RedisBloom};

    /// A batch with repeats (within it, and of items added before) answers and sets bits as
    /// the same items added one by one in order, whatever the layout, shards and threads.
    #[test]
    fn a_batch_is_the_same_as_adds_in_order() {
        for layout in [Layout::Native, Layout::GoZero] {
            for shards in [1, 3] {
                for threads in [1, 2, 3] {
                    let build = || {
                        RedisBloom::builder("k")
                            .layout(layout)
                            .shards(shards)
                            .expected_items(20_000)
                            .false_positive_rate(0.01)
                            .build_offline()
                            .unwrap()
                    };
                    let (mut one, mut batch) = (build(), build().with_threads(threads));
                    let items: Vec<String> = (0..30_000)
                        .map(|i| format!("item {}", i % 21_000))
                        .collect();
                    let before = &items[..500];
                    let want_before: u64 = before.iter().map(|i| u64::from(one.add(i))).sum();
                    assert_eq!(batch.add_batch(before), want_before, "a small batch");
                    let want: u64 = items.iter().map(|i| u64::from(one.add(i))).sum();
                    let got = batch.add_batch(&items);
                    assert_eq!(got, want, "{layout:?} {shards} shards {threads} threads");
                    assert!(want > 19_000 && want < 20_600, "{want}");
                    assert_eq!(one.parts, batch.parts, "{layout:?} {shards} {threads}");
                }
            }
        }
    }

    /// A copy whose key held bytes past the filter's size (written there by something else)
    /// checks and adds as one without them: those bytes are never read or set.
    #[test]
    fn bytes_past_the_filter_are_left_alone() {
        let mut offline = RedisBloom::builder("k")
            .expected_items(20_000)
            .false_positive_rate(0.01)
            .build_offline()
            .unwrap();
        let items: Vec<String> = (0..10_000).map(|i| format!("item {i}")).collect();
        offline.add_batch(&items);
        let full = offline.parts[0].1.len();
        offline.parts[0].1.extend([0xff; 300_000]);
        assert!(offline.exists_batch(&items).iter().all(|&f| f));
        let more: Vec<String> = (0..10_000).map(|i| format!("more {i}")).collect();
        assert!(offline.add_batch(&more) > 9_800);
        assert_eq!(offline.parts[0].1[full..], [0xff; 300_000][..]);
    }

    /// A batch check answers as `exists` one by one, whatever the layout, shards and threads,
    /// and changes no bit.
    #[test]
    fn a_batch_check_is_the_same_as_checks_one_by_one() {
        for layout in [Layout::Native, Layout::GoZero] {
            for shards in [1, 3] {
                for threads in [1, 2, 3] {
                    let mut offline = RedisBloom::builder("k")
                        .layout(layout)
                        .shards(shards)
                        .expected_items(20_000)
                        .false_positive_rate(0.01)
                        .build_offline()
                        .unwrap()
                        .with_threads(threads);
                    let added: Vec<String> = (0..20_000).map(|i| format!("in {i}")).collect();
                    offline.add_batch(&added);
                    let before = offline.parts.clone();
                    let probe: Vec<String> = (0..40_000)
                        .map(|i| match i % 2 {
                            0 => format!("in {}", i / 2),
                            _ => format!("out {i}"),
                        })
                        .collect();
                    let want: Vec<bool> = probe.iter().map(|i| offline.exists(i)).collect();
                    let got = offline.exists_batch(&probe);
                    assert_eq!(got, want, "{layout:?} {shards} shards {threads} threads");
                    assert!(got.iter().step_by(2).all(|&f| f), "no false negative");
                    let fp = got.iter().skip(1).step_by(2).filter(|&&f| f).count();
                    assert!(fp > 50 && fp < 400, "{fp} false positives of 20,000");
                    assert_eq!(offline.parts, before, "the bits are unchanged");
                }
            }
        }
    }
}
