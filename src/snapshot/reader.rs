//! Reading a snapshot from any `AsyncRead`, one verified chunk at a time.

use std::fmt;

use tokio::io::AsyncRead;

use super::chunk::{check_prefix, decode_lz4, Encoding};
use super::format::{
    block_len_range, EndBlock, CHUNK_PREFIX, MAGIC, MAX_BLOCK, MAX_CHUNK, TAG_END, TAG_HEADER,
    TAG_SECTION, VERSION,
};
use super::input::{corrupt, Input, Place};
use super::{SectionHeader, SnapshotError, SnapshotHeader};

/// Reads a snapshot file from any [`AsyncRead`], streaming: it holds one chunk (at most 1 MiB)
/// at a time, whatever the file's size.
///
/// Every checksum is verified before the bytes it covers are handed out, so each section header
/// and chunk returned is exactly what the writer wrote at that place in the file. Whether the
/// file is *complete* is known only at its end: apply what is read somewhere temporary, and
/// keep it only once [`next_section`](Self::next_section) has returned `Ok(None)`.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use redbloom::{SectionHeader, SnapshotHeader, SnapshotReader, SnapshotWriter};
///
/// let mut writer = SnapshotWriter::new(Vec::new(), &SnapshotHeader::new("plain", "bits=64", 1)).await?;
/// writer.begin_section(&SectionHeader::new(0, "bits", 8)).await?;
/// writer.write(&[1, 2, 3, 4, 5, 6, 7, 8]).await?;
/// let file = writer.finish().await?;
///
/// let (mut reader, header) = SnapshotReader::open(&file[..]).await?;
/// assert_eq!(header.params, "bits=64");
/// while let Some(section) = reader.next_section().await? {
///     assert_eq!((section.shard, section.role.as_str()), (0, "bits"));
///     while let Some(bytes) = reader.next_chunk().await? {
///         assert_eq!(bytes, [1, 2, 3, 4, 5, 6, 7, 8]);
///     }
/// }
/// assert_eq!(reader.bytes_read(), file.len() as u64);
/// # Ok::<(), redbloom::SnapshotError>(())
/// # }).unwrap();
/// ```
pub struct SnapshotReader<R> {
    input: Input<R>,
    shards: u32,
    /// The content of the block being read.
    block: Vec<u8>,
    /// An LZ4 chunk's payload.
    stored: Vec<u8>,
    /// The raw bytes of the last chunk read.
    raw: Vec<u8>,
    open: Option<OpenSection>,
    /// Sections read, and their total length.
    sections: u32,
    total: u64,
    state: State,
}

/// A chunk's prefix, verified and checked.
#[derive(Debug)]
struct ChunkPrefix {
    raw_len: usize,
    encoding: Encoding,
    stored_len: usize,
    raw_crc: u32,
}

/// The section whose chunks are being read.
#[derive(Debug, Clone, Copy)]
struct OpenSection {
    number: u32,
    left: u64,
    chunks: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Reading,
    /// The end block was read and verified.
    Done,
    Failed,
}

impl<R: AsyncRead + Unpin> SnapshotReader<R> {
    /// Reads and verifies the file's start: the magic, the format version and the header block.
    ///
    /// # Errors
    /// [`SnapshotError::NotASnapshot`] if the input is not a snapshot,
    /// [`SnapshotError::UnsupportedVersion`] for a format this code does not know,
    /// [`SnapshotError::Truncated`], [`SnapshotError::Corrupt`], or [`SnapshotError::Io`].
    pub async fn open(input: R) -> Result<(Self, SnapshotHeader), SnapshotError> {
        let mut input = Input::new(input);
        read_preamble(&mut input).await?;
        let mut reader = Self {
            input,
            shards: 0,
            block: Vec::with_capacity(MAX_BLOCK),
            stored: Vec::with_capacity(MAX_CHUNK),
            raw: Vec::with_capacity(MAX_CHUNK),
            open: None,
            sections: 0,
            total: 0,
            state: State::Reading,
        };
        let (_, len, start) = reader.read_prefix(Place::Header, &[TAG_HEADER]).await?;
        reader.read_content(len, start, Place::Header).await?;
        let header = SnapshotHeader::decode(&reader.block)
            .map_err(|detail| corrupt(start, Place::Header, &detail))?;
        reader.shards = header.shards;
        Ok((reader, header))
    }

    /// The next section's header, after skipping (and verifying) what is left of the current
    /// one's chunks; `None` once the end block is read and verified and the input has ended.
    ///
    /// # Errors
    /// [`SnapshotError::Truncated`], [`SnapshotError::Corrupt`] (a checksum, or the end block's
    /// counts), [`SnapshotError::TrailingBytes`], [`SnapshotError::Io`];
    /// [`SnapshotError::InvalidInput`] after an earlier error.
    pub async fn next_section(&mut self) -> Result<Option<SectionHeader>, SnapshotError> {
        self.check_usable()?;
        let result = self.advance().await;
        if result.is_err() {
            self.state = State::Failed;
        }
        result
    }

    /// The raw bytes of the current section's next chunk (at most 1 MiB); `None` at the
    /// section's end. A section's chunks add up to its [`SectionHeader::len`].
    ///
    /// # Errors
    /// [`SnapshotError::Truncated`], [`SnapshotError::Corrupt`], [`SnapshotError::Io`];
    /// [`SnapshotError::InvalidInput`] after an earlier error.
    pub async fn next_chunk(&mut self) -> Result<Option<&[u8]>, SnapshotError> {
        self.check_usable()?;
        match self.read_chunk().await {
            Ok(true) => Ok(Some(&self.raw)),
            Ok(false) => Ok(None),
            Err(err) => {
                self.state = State::Failed;
                Err(err)
            }
        }
    }

    /// Bytes read from the input so far (the file's size, once the end is reached).
    pub fn bytes_read(&self) -> u64 {
        self.input.offset()
    }

    fn check_usable(&self) -> Result<(), SnapshotError> {
        match self.state {
            State::Failed => Err(SnapshotError::InvalidInput(
                "the snapshot reader already failed".into(),
            )),
            State::Reading | State::Done => Ok(()),
        }
    }

    async fn advance(&mut self) -> Result<Option<SectionHeader>, SnapshotError> {
        if self.state == State::Done {
            return Ok(None);
        }
        while self.read_chunk().await? {}
        let before = Place::After(self.sections);
        let (tag, len, start) = self.read_prefix(before, &[TAG_SECTION, TAG_END]).await?;
        if tag == TAG_END {
            self.read_end(len, start).await?;
            return Ok(None);
        }
        let number = self
            .sections
            .checked_add(1)
            .ok_or_else(|| corrupt(start, before, "more than 2^32 - 1 sections"))?;
        let place = Place::Section(number);
        self.read_content(len, start, place).await?;
        let section =
            SectionHeader::decode(&self.block).map_err(|detail| corrupt(start, place, &detail))?;
        self.check_section(&section, start, place)?;
        self.sections = number;
        self.open = Some(OpenSection {
            number,
            left: section.len,
            chunks: 0,
        });
        Ok(Some(section))
    }

    fn check_section(
        &mut self,
        section: &SectionHeader,
        start: u64,
        place: Place,
    ) -> Result<(), SnapshotError> {
        if section.shard >= self.shards {
            let detail = format!(
                "shard {} is not below the header's {} shards",
                section.shard, self.shards
            );
            return Err(corrupt(start, place, &detail));
        }
        self.total = self
            .total
            .checked_add(section.len)
            .ok_or_else(|| corrupt(start, place, "the sections' lengths overflow a u64"))?;
        Ok(())
    }

    /// Reads and checks the end block, then that the input ends there.
    async fn read_end(&mut self, len: usize, start: u64) -> Result<(), SnapshotError> {
        self.read_content(len, start, Place::End).await?;
        let end =
            EndBlock::decode(&self.block).map_err(|detail| corrupt(start, Place::End, &detail))?;
        let seen = EndBlock {
            sections: self.sections,
            total: self.total,
        };
        if end != seen {
            let detail = format!(
                "it counts {} sections of {} bytes, the file has {} of {}",
                end.sections, end.total, seen.sections, seen.total
            );
            return Err(corrupt(start, Place::End, &detail));
        }
        if !self.input.at_end().await? {
            return Err(SnapshotError::TrailingBytes {
                offset: self.input.offset() - 1,
            });
        }
        self.open = None;
        self.state = State::Done;
        Ok(())
    }

    /// Reads and verifies a block's tag and length, which must be one of `tags` and within that
    /// tag's limits; returns (tag, length, the block's offset).
    async fn read_prefix(
        &mut self,
        place: Place,
        tags: &[u8],
    ) -> Result<(u8, usize, u64), SnapshotError> {
        let start = self.input.offset();
        let mut prefix = [0; 5];
        self.input.read_covered(&mut prefix, place).await?;
        self.input
            .check_crc(start, place, "prefix checksum mismatch")
            .await?;
        let [tag, len @ ..] = prefix;
        let len = u32::from_be_bytes(len) as usize;
        let range = block_len_range(tag).filter(|_| tags.contains(&tag));
        let Some((least, most)) = range else {
            return Err(corrupt(
                start,
                place,
                &format!("unexpected block tag {tag:#04x}"),
            ));
        };
        if !(least..=most).contains(&len) {
            let detail = format!("block length {len} is not between {least} and {most}");
            return Err(corrupt(start, place, &detail));
        }
        Ok((tag, len, start))
    }

    /// Reads and verifies a block's content of `len` bytes into `self.block`.
    async fn read_content(
        &mut self,
        len: usize,
        start: u64,
        place: Place,
    ) -> Result<(), SnapshotError> {
        self.block.clear();
        self.block.resize(len, 0);
        self.input.read_covered(&mut self.block, place).await?;
        self.input
            .check_crc(start, place, "checksum mismatch")
            .await
    }

    /// Reads and verifies the open section's next chunk into `self.raw`; false if it has none.
    async fn read_chunk(&mut self) -> Result<bool, SnapshotError> {
        let Some(open) = self.open.filter(|open| open.left > 0) else {
            return Ok(false);
        };
        let place = Place::Chunk {
            section: open.number,
            chunk: open.chunks + 1,
        };
        let start = self.input.offset();
        let prefix = self.read_chunk_prefix(start, place, open.left).await?;
        self.read_payload(&prefix, start, place).await?;
        if crc32fast::hash(&self.raw) != prefix.raw_crc {
            return Err(corrupt(start, place, "the raw bytes' checksum mismatch"));
        }
        self.open = Some(OpenSection {
            left: open.left - prefix.raw_len as u64,
            chunks: open.chunks + 1,
            ..open
        });
        Ok(true)
    }

    /// Reads, verifies and checks a chunk's prefix against the `left` bytes of its section.
    async fn read_chunk_prefix(
        &mut self,
        start: u64,
        place: Place,
        left: u64,
    ) -> Result<ChunkPrefix, SnapshotError> {
        let mut bytes = [0; CHUNK_PREFIX];
        self.input.read_covered(&mut bytes, place).await?;
        self.input
            .check_crc(start, place, "prefix checksum mismatch")
            .await?;
        let [r0, r1, r2, r3, encoding, s0, s1, s2, s3, c0, c1, c2, c3] = bytes;
        let raw_len = u32::from_be_bytes([r0, r1, r2, r3]);
        let stored_len = u32::from_be_bytes([s0, s1, s2, s3]);
        let encoding = check_prefix(raw_len, encoding, stored_len, left)
            .map_err(|detail| corrupt(start, place, &detail))?;
        Ok(ChunkPrefix {
            raw_len: raw_len as usize,
            encoding,
            stored_len: stored_len as usize,
            raw_crc: u32::from_be_bytes([c0, c1, c2, c3]),
        })
    }

    /// Reads and verifies a chunk's payload, and decodes it into `self.raw`.
    async fn read_payload(
        &mut self,
        prefix: &ChunkPrefix,
        start: u64,
        place: Place,
    ) -> Result<(), SnapshotError> {
        self.raw.clear();
        let payload = match prefix.encoding {
            Encoding::Zeros => {
                self.raw.resize(prefix.raw_len, 0);
                &mut [][..]
            }
            Encoding::Raw => {
                self.raw.resize(prefix.raw_len, 0);
                &mut self.raw[..]
            }
            Encoding::Lz4 => {
                self.stored.clear();
                self.stored.resize(prefix.stored_len, 0);
                &mut self.stored[..]
            }
        };
        self.input.read_covered(payload, place).await?;
        self.input
            .check_crc(start, place, "payload checksum mismatch")
            .await?;
        if prefix.encoding == Encoding::Lz4 {
            decode_lz4(&self.stored, &mut self.raw, prefix.raw_len)
                .map_err(|detail| corrupt(start, place, &detail))?;
        }
        Ok(())
    }

    /// The largest capacity of its buffers, for the tests of bounded memory.
    #[cfg(test)]
    pub(super) fn buffer_capacity(&self) -> usize {
        self.block
            .capacity()
            .max(self.stored.capacity())
            .max(self.raw.capacity())
    }
}

/// Reads and checks the magic, the version and the preamble's checksum.
async fn read_preamble<R: AsyncRead + Unpin>(input: &mut Input<R>) -> Result<(), SnapshotError> {
    let mut magic = [0; MAGIC.len()];
    let got = input.read_up_to(&mut magic).await?;
    if magic[..got] != MAGIC[..got] {
        return Err(SnapshotError::NotASnapshot);
    }
    if got < MAGIC.len() {
        return Err(SnapshotError::Truncated {
            offset: input.offset(),
            what: Place::Magic.to_string(),
        });
    }
    input.cover(&magic);
    let mut version = [0; 2];
    input.read_covered(&mut version, Place::Preamble).await?;
    input
        .check_crc(0, Place::Preamble, "checksum mismatch")
        .await?;
    match u16::from_be_bytes(version) {
        VERSION => Ok(()),
        other => Err(SnapshotError::UnsupportedVersion(other)),
    }
}

impl<R> fmt::Debug for SnapshotReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotReader")
            .field("sections", &self.sections)
            .field("total", &self.total)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}
