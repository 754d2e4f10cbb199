//! Snapshots of the filters kept in one string per shard (SPEC.md §5): plain filters (with the
//! offline build) and counting filters.
//!
//! The file holds one `bits` section per shard: the shard's string as Redis holds it (as long
//! as its highest byte set), so that an export imported elsewhere gives the same bytes. The
//! header's parameters are the filter's stored ones (`layout=… bits=… hashes=…`).

use super::transfer::{self, Group, ImportMode, Params, Refused, Staged, Stored, Transferred};
use super::{SectionHeader, SnapshotError, SnapshotHeader, SnapshotReader, SnapshotWriter};
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::hash::ItemHash;
use crate::io::exec::Exec;
use crate::io::guard::Evidence;
use crate::io::guard::Guard;
use crate::{keys, Builder, CountingBloom, Layout, RedisBloom};
use redis::aio::ConnectionLike;
use tokio::io::{AsyncRead, AsyncWrite};

/// The kind a plain filter's snapshot names.
const KIND: &str = "plain";

/// The section of a shard's bits.
const BITS: &str = "bits";

/// A filter kept in one string per shard (plain, counting), as snapshots see it.
pub(crate) struct Strings<'a, C> {
    pub(crate) kind: &'static str,
    pub(crate) key: &'a str,
    pub(crate) exec: &'a Exec<C>,
    pub(crate) guard: &'a Guard,
    /// Each shard's key and the most bytes it holds.
    pub(crate) parts: Vec<(String, u64)>,
    /// Whether a filter of one key keeps stored parameters for the swap to check and store.
    pub(crate) params: bool,
    /// Whether the file's bytes may be ORed in ([`ImportMode::Merge`]).
    pub(crate) merge: bool,
}

impl<C> Strings<'_, C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    pub(crate) async fn export<W: AsyncWrite + Unpin>(&self, out: W) -> Result<Transferred> {
        self.guard.ensure(self.exec, false).await?;
        let shards = self.parts.len() as u32;
        let header = SnapshotHeader::new(self.kind, self.guard.fingerprint(), shards);
        let keys: Vec<Stored> = self
            .parts
            .iter()
            .enumerate()
            .map(|(i, (key, max_bytes))| Stored {
                shard: i as u32,
                role: BITS.to_owned(),
                meta: String::new(),
                key: key.clone(),
                max_bytes: *max_bytes,
                hash: false,
            })
            .collect();
        let too_long = |_: &Stored, len: u64| self.guard.refusal(Evidence::Length(len as i64));
        let (mut out, moved) = transfer::export(self.exec, &header, &keys, too_long, out).await?;
        tokio::io::AsyncWriteExt::shutdown(&mut out)
            .await
            .map_err(|e| Error::Snapshot(SnapshotError::Io(e)))?;
        Ok(moved)
    }

    pub(crate) async fn import<R: AsyncRead + Unpin>(
        &self,
        input: R,
        mode: ImportMode,
    ) -> Result<Transferred> {
        if mode == ImportMode::Merge && !self.merge {
            return Err(Error::InvalidConfig(format!(
                "a {} filter's file cannot be merged into it (its counters are not bits to \
                 OR); import it whole, or load its items",
                self.kind
            )));
        }
        let (mut reader, header) = SnapshotReader::open(input).await?;
        let fingerprint = self.guard.fingerprint();
        let shards = self.parts.len() as u32;
        transfer::check_header(&header, self.key, self.kind, fingerprint, shards)?;
        self.guard.ensure(self.exec, false).await?;
        let nonce = nonce();
        let place = |section: &SectionHeader| -> Result<Staged> {
            let (key, max_bytes) = self
                .parts
                .get(section.shard as usize)
                .filter(|_| section.role == BITS)
                .ok_or_else(|| invalid(format!("no place for a section {section:?}")))?;
            if section.len > *max_bytes {
                return Err(invalid(format!(
                    "shard {} holds {} bytes, more than its {max_bytes}",
                    section.shard, section.len
                )));
            }
            Ok(Staged {
                target: key.clone(),
                staging: keys::sidecar(key, &format!("redbloom:import:{nonce}"))?,
                len: section.len,
                ttl_ms: section.ttl_ms,
                hash: false,
                pieces: None,
            })
        };
        let staged = transfer::stage(self.exec, &mut reader, mode, place).await?;
        if staged.len() != self.parts.len() {
            transfer::drop_staged(self.exec, &staged).await;
            return Err(invalid(format!(
                "the file holds {} of the filter's {} shards",
                staged.len(),
                self.parts.len()
            )));
        }
        let filter_bytes = staged.iter().map(|s| s.len).sum();
        self.swap_all(&staged, mode).await?;
        self.guard.reset();
        Ok(Transferred {
            file_bytes: reader.bytes_read(),
            filter_bytes,
        })
    }

    /// The staged shards swapped in: a filter of one key checks (and stores) its parameters
    /// in its swap; a sharded one stores them first, beside.
    async fn swap_all(&self, staged: &[Staged], mode: ImportMode) -> Result<()> {
        let guard = self.guard;
        let params = match (self.parts.len(), guard.key(), self.params) {
            (1, Some(key), true) => Some(Params {
                key,
                bare: &staged[0].target,
                fingerprint: guard.fingerprint(),
            }),
            (1, _, _) => None,
            // A sharded filter's parameters, in a slot of their own: checked and stored in the
            // one step when the server allows it, else beside, before the shards.
            (_, key, _) => key.map(|key| Params {
                key,
                bare: key,
                fingerprint: guard.fingerprint(),
            }),
        };
        let groups: Vec<Group> = staged
            .iter()
            .map(|s| Group {
                staged: vec![s.clone()],
                extra: Vec::new(),
            })
            .collect();
        let before = guard.ensure(self.exec, true);
        match transfer::swap_groups(self.exec, &groups, params, before, mode).await? {
            Ok(()) => Ok(()),
            Err(Refused::Params(stored)) => Err(guard.refusal(Evidence::Stored(stored))),
        }
    }
}

impl<C> RedisBloom<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    fn strings(&self) -> Strings<'_, C> {
        let view = self.plain_parts();
        Strings {
            kind: KIND,
            key: self.key(),
            exec: view.exec,
            guard: view.guard,
            parts: view
                .parts
                .iter()
                .map(|p| (p.key.clone(), p.geometry.max_bytes()))
                .collect(),
            params: self.layout() == Layout::Native,
            merge: true,
        }
    }

    /// Writes the filter to `out` as a snapshot file (docs/snapshot-format.md): its kind and
    /// parameters, then each shard's bits, read in 1 MiB pieces (no command holds the server
    /// longer than one piece's copy; this side holds about 2 MiB whatever the filter's size).
    /// Every add acknowledged before the export began is in the file: bits only ever get set,
    /// and each shard's length is taken before its bytes are read.
    ///
    /// ```no_run
    /// # async fn demo(seen: redbloom::RedisBloom<redbloom::redis::aio::MultiplexedConnection>)
    /// # -> redbloom::Result<()> {
    /// let file = tokio::fs::File::create("seen.rbloom").await.expect("file");
    /// let moved = seen.export(file).await?;
    /// println!("{} bytes of filter in {} bytes of file", moved.filter_bytes, moved.file_bytes);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::ParamsMismatch`] when the key holds a filter with other parameters;
    /// [`Error::WrongType`]; [`Error::Snapshot`] when writing `out` fails; network faults.
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "export", kind = "plain", key = self.key(), attempts))]
    pub async fn export<W: AsyncWrite + Unpin>(&self, out: W) -> Result<Transferred> {
        self.strings().export(out).await
    }

    /// Puts a snapshot file in place at this filter's key: [`ImportMode::Replace`] makes the
    /// filter the file's (every shard's bits replaced, atomically per shard: other clients see
    /// the old bits or the new ones), [`ImportMode::Merge`] adds the file's items to it (its
    /// bits ORed in, atomically per shard as well; or, when the filter was built with
    /// [`merge_chunk_bytes`](crate::Builder::merge_chunk_bytes), one range of that size at a
    /// time, each range atomic, the merge as a whole not). The file's kind and parameters must
    /// be this filter's.
    ///
    /// The file is read in chunks into staging keys beside the filter's (same slot, a 120 s
    /// TTL renewed as they are written), and swapped (or merged) in only once the whole file
    /// has been verified: a truncated or corrupted file, a mismatch, or an importer killed at
    /// any moment (of a merge by ranges: before its steps begin) leave the filter as it was. A
    /// replace makes each shard's staging string at its full size in one command (about 1 ns
    /// per byte: shard big filters to shorten it), and a merge holds the server for one
    /// `BITOP` of each whole key (about 1.6 ms per MiB); a merge by ranges stages one key per
    /// range and never holds the server longer than one range's OR.
    ///
    /// # Errors
    /// [`Error::ParamsMismatch`] when the file's parameters or the filter at the key differ
    /// from this filter's; [`Error::Snapshot`] naming what is wrong with the file;
    /// [`Error::WrongType`]; network faults. In every case the filter is left as it was.
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "import", kind = "plain", key = self.key(), attempts))]
    pub async fn import<R: AsyncRead + Unpin>(
        &self,
        input: R,
        mode: ImportMode,
    ) -> Result<Transferred> {
        self.strings().import(input, mode).await
    }
}

impl<C> CountingBloom<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    fn strings(&self) -> Strings<'_, C> {
        let (exec, guard, parts) = self.snapshot_parts();
        Strings {
            kind: "counting",
            key: self.key(),
            exec,
            guard,
            parts,
            params: true,
            merge: false,
        }
    }

    /// Writes the filter to `out` as a snapshot file, as
    /// [`RedisBloom::export`] does: each shard's counters read in 1 MiB pieces. Every item
    /// added before the export began and not removed while it runs is in the file (a
    /// counter only goes down when an item is removed).
    ///
    /// # Errors
    /// As for [`RedisBloom::export`].
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "export", kind = "counting", key = self.key(), attempts))]
    pub async fn export<W: AsyncWrite + Unpin>(&self, out: W) -> Result<Transferred> {
        self.strings().export(out).await
    }

    /// Replaces the filter with a snapshot file's, as [`RedisBloom::import`] does.
    /// [`ImportMode::Merge`] is refused (counters are not bits to OR): load the items instead.
    ///
    /// # Errors
    /// As for [`RedisBloom::import`]; [`Error::InvalidConfig`] for a merge.
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "import", kind = "counting", key = self.key(), attempts))]
    pub async fn import<R: AsyncRead + Unpin>(
        &self,
        input: R,
        mode: ImportMode,
    ) -> Result<Transferred> {
        self.strings().import(input, mode).await
    }
}

fn invalid(what: String) -> Error {
    Error::Snapshot(SnapshotError::InvalidInput(what))
}

/// A name for one import's staging keys: the time and the process.
pub(super) fn nonce() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}.{:x}", nanos & 0xffff_ffff_ffff, std::process::id())
}

/// A plain filter built in memory, without Redis (SPEC.md §5 `build`): the same bits as adds
/// to a filter with the same parameters, written as a snapshot that
/// [`RedisBloom::import`] puts in place. It holds the filter's bits in memory (all shards).
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
    layout: Layout,
    /// Each shard's shape and bits (as long as its highest byte set, as Redis would hold it).
    parts: Vec<(Geometry, Vec<u8>)>,
}

impl Builder {
    /// A plain filter with these parameters built in memory, without Redis:
    /// [`OfflineBloom`]. Its bits take `bits / 8` bytes here once full.
    ///
    /// # Errors
    /// As for [`build`](Builder::build).
    pub fn build_offline(self) -> Result<OfflineBloom> {
        let filter = self.build(())?;
        let view = filter.plain_parts();
        Ok(OfflineBloom {
            key: filter.key().to_owned(),
            fingerprint: view.guard.fingerprint().to_owned(),
            layout: filter.layout(),
            parts: view
                .parts
                .iter()
                .map(|part| (part.geometry, Vec::new()))
                .collect(),
        })
    }
}

impl OfflineBloom {
    /// Adds `item`; `true` when one of its bits was not set (certainly new), as
    /// [`RedisBloom::add`] answers.
    pub fn add(&mut self, item: impl AsRef<[u8]>) -> bool {
        let item = item.as_ref();
        let shard = crate::hash::shard_of(item, self.parts.len() as u32);
        let (geometry, bits) = &mut self.parts[shard];
        let mut offsets = Vec::with_capacity(geometry.hashes as usize);
        geometry.push_offsets(&ItemHash::of(item, self.layout), &mut offsets);
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
        let mut offsets = Vec::with_capacity(geometry.hashes as usize);
        geometry.push_offsets(&ItemHash::of(item, self.layout), &mut offsets);
        offsets
            .iter()
            .all(|&offset| crate::dense::test(bits, offset))
    }

    /// The key the filter was built for.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Writes the filter as a snapshot file: what [`RedisBloom::export`] would write for the
    /// same adds.
    ///
    /// # Errors
    /// [`Error::Snapshot`] when writing fails.
    pub async fn write_snapshot<W: AsyncWrite + Unpin>(&self, out: W) -> Result<Transferred> {
        let header = SnapshotHeader::new(KIND, self.fingerprint.clone(), self.parts.len() as u32);
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
