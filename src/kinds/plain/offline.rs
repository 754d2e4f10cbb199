//! A plain filter built in memory, without Redis (SPEC.md §5 `build`).

use super::Plain;
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::hash::ItemHash;
use crate::layout::Layout;
use crate::snapshot::{
    strings::BITS, SectionHeader, SnapshotError, SnapshotHeader, SnapshotWriter, Transferred,
};
use crate::Builder;
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
}

impl Builder<Plain> {
    /// A plain filter with these parameters built in memory, without Redis:
    /// [`OfflineBloom`]. Its bits take `bits / 8` bytes here once full (nothing before).
    ///
    /// # Errors
    /// As for [`build`](Builder::build).
    pub fn build_offline(self) -> Result<OfflineBloom> {
        let made = self.made()?;
        Ok(OfflineBloom {
            key: self.key,
            fingerprint: made.guard.fingerprint().to_owned(),
            geometry: made.kind.geometry,
            parts: made
                .parts
                .iter()
                .map(|part| (part.geometry, Vec::new()))
                .collect(),
        })
    }
}

impl OfflineBloom {
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
            <Plain as crate::kind::Kind>::NAME,
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
