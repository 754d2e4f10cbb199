//! Writing a snapshot to any `AsyncWrite`, cutting each section into chunks as it comes.

use std::fmt;

use crc32fast::Hasher;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::chunk::Encoder;
use super::format::{
    EndBlock, CHUNK_PREFIX, MAGIC, MAX_CHUNK, TAG_END, TAG_HEADER, TAG_SECTION, VERSION,
};
use super::{SectionHeader, SnapshotError, SnapshotHeader};

/// Writes a snapshot file to any [`AsyncWrite`], streaming: it holds one chunk (1 MiB) and its
/// compressed form at a time, whatever the filter's size.
///
/// Call [`begin_section`](Self::begin_section) for each part of the filter, then
/// [`write`](Self::write) exactly its declared length in pieces of any size, and end with
/// [`finish`](Self::finish). Each chunk is stored as all zeros (no payload), LZ4, or raw,
/// whichever is smallest (LZ4 only if it saves an eighth). See docs/snapshot-format.md.
///
/// The output is not buffered beyond one chunk: each chunk goes out in three `write_all`
/// calls. After an I/O error the writer refuses further calls and the output is not a valid
/// snapshot.
pub struct SnapshotWriter<W> {
    out: W,
    /// The running CRC: of every byte written so far except the frames' CRC fields.
    crc: Hasher,
    /// The content of the next block.
    block: Vec<u8>,
    /// Raw bytes of the chunk being filled.
    pending: Vec<u8>,
    encoder: Encoder,
    chunk_size: usize,
    shards: u32,
    open: Option<OpenSection>,
    sections: u32,
    total: u64,
    written: u64,
    failed: bool,
}

/// The section being written.
#[derive(Debug, Clone, Copy)]
struct OpenSection {
    number: u32,
    /// Bytes the caller has yet to write.
    left: u64,
}

impl<W: AsyncWrite + Unpin> SnapshotWriter<W> {
    /// Starts a snapshot on `out`: writes the magic, the format version and the header block.
    ///
    /// # Errors
    /// [`SnapshotError::InvalidInput`] if the header has 0 shards, a string over 65,535 bytes,
    /// or over 64 KiB in all (nothing is written); [`SnapshotError::Io`] if writing fails.
    pub async fn new(out: W, header: &SnapshotHeader) -> Result<Self, SnapshotError> {
        Self::start(out, header, MAX_CHUNK).await
    }

    /// [`new`](Self::new), cutting chunks of `chunk_size` bytes (1 to [`MAX_CHUNK`]).
    pub(super) async fn start(
        out: W,
        header: &SnapshotHeader,
        chunk_size: usize,
    ) -> Result<Self, SnapshotError> {
        let chunk_size = chunk_size.clamp(1, MAX_CHUNK);
        let mut writer = Self {
            out,
            crc: Hasher::new(),
            block: Vec::new(),
            pending: Vec::with_capacity(chunk_size),
            encoder: Encoder::new(chunk_size),
            chunk_size,
            shards: header.shards,
            open: None,
            sections: 0,
            total: 0,
            written: 0,
            failed: false,
        };
        header.encode(&mut writer.block)?;
        let mut preamble = [0; MAGIC.len() + 2];
        preamble[..MAGIC.len()].copy_from_slice(&MAGIC);
        preamble[MAGIC.len()..].copy_from_slice(&VERSION.to_be_bytes());
        writer.crc.update(&preamble);
        let mut first = preamble.to_vec();
        first.extend_from_slice(&writer.crc_now());
        writer.emit(&first).await?;
        writer.put_block(TAG_HEADER).await?;
        Ok(writer)
    }

    /// Starts the next section; the previous one must be complete.
    ///
    /// # Errors
    /// [`SnapshotError::InvalidInput`] if the previous section is incomplete, the shard is not
    /// below the header's shard count, a string is over 65,535 bytes, or the sections' total
    /// length overflows a `u64` (nothing is written); [`SnapshotError::Io`] if writing fails.
    pub async fn begin_section(&mut self, section: &SectionHeader) -> Result<(), SnapshotError> {
        self.check_usable()?;
        self.check_complete()?;
        if section.shard >= self.shards {
            return Err(invalid(format!(
                "shard {} is not below the header's {} shards",
                section.shard, self.shards
            )));
        }
        let number = self
            .sections
            .checked_add(1)
            .ok_or_else(|| invalid("more than 2^32 - 1 sections".into()))?;
        let total = self
            .total
            .checked_add(section.len)
            .ok_or_else(|| invalid("the sections' lengths overflow a u64".into()))?;
        section.encode(&mut self.block)?;
        let result = self.put_block(TAG_SECTION).await;
        self.poison(result)?;
        self.sections = number;
        self.total = total;
        self.open = Some(OpenSection {
            number,
            left: section.len,
        });
        Ok(())
    }

    /// Writes the next `data.len()` bytes of the current section; chunks go out as they fill.
    ///
    /// # Errors
    /// [`SnapshotError::InvalidInput`] if no section is begun or `data` goes past its declared
    /// length (nothing is written); [`SnapshotError::Io`] if writing fails.
    pub async fn write(&mut self, data: &[u8]) -> Result<(), SnapshotError> {
        self.check_usable()?;
        let Some(open) = self.open else {
            return Err(invalid("write before any section is begun".into()));
        };
        if data.len() as u64 > open.left {
            return Err(invalid(format!(
                "section {} has {} bytes left to write, not {}",
                open.number,
                open.left,
                data.len()
            )));
        }
        let result = self.fill(data, open).await;
        self.poison(result)
    }

    /// Writes the end block and flushes the output, which it returns (not shut down).
    ///
    /// # Errors
    /// [`SnapshotError::InvalidInput`] if the last section is incomplete (nothing is written);
    /// [`SnapshotError::Io`] if writing or flushing fails.
    pub async fn finish(self) -> Result<W, SnapshotError> {
        Ok(self.finish_counted().await?.0)
    }

    /// [`finish`](Self::finish), and the file's size in bytes.
    ///
    /// # Errors
    /// As for [`finish`](Self::finish).
    pub async fn finish_counted(mut self) -> Result<(W, u64), SnapshotError> {
        self.check_usable()?;
        self.check_complete()?;
        let end = EndBlock {
            sections: self.sections,
            total: self.total,
        };
        self.block.clear();
        self.block.extend_from_slice(&end.encode());
        self.put_block(TAG_END).await?;
        self.out.flush().await?;
        Ok((self.out, self.written))
    }

    /// Bytes written to the output so far (the file's size, after [`finish`](Self::finish)).
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Adds `data` to the pending chunk, writing each chunk that fills or ends the section.
    async fn fill(&mut self, mut data: &[u8], mut open: OpenSection) -> Result<(), SnapshotError> {
        while !data.is_empty() {
            let room = self.chunk_size - self.pending.len();
            let (now, rest) = data.split_at(room.min(data.len()));
            self.pending.extend_from_slice(now);
            open.left -= now.len() as u64;
            self.open = Some(open);
            data = rest;
            if self.pending.len() == self.chunk_size || open.left == 0 {
                self.put_chunk().await?;
            }
        }
        Ok(())
    }

    /// Writes the pending bytes as one chunk: prefix, its CRC, payload, the payload's CRC.
    async fn put_chunk(&mut self) -> Result<(), SnapshotError> {
        let raw_crc = crc32fast::hash(&self.pending);
        let (encoding, payload) = self.encoder.encode(&self.pending);
        let mut head = [0; CHUNK_PREFIX + 4];
        head[..4].copy_from_slice(&(self.pending.len() as u32).to_be_bytes());
        head[4] = encoding as u8;
        head[5..9].copy_from_slice(&(payload.len() as u32).to_be_bytes());
        head[9..13].copy_from_slice(&raw_crc.to_be_bytes());
        self.crc.update(&head[..CHUNK_PREFIX]);
        head[CHUNK_PREFIX..].copy_from_slice(&self.crc.clone().finalize().to_be_bytes());
        self.crc.update(payload);
        let tail = self.crc.clone().finalize().to_be_bytes();
        self.out.write_all(&head).await?;
        self.out.write_all(payload).await?;
        self.out.write_all(&tail).await?;
        self.written += (head.len() + payload.len() + tail.len()) as u64;
        self.pending.clear();
        Ok(())
    }

    /// Writes `self.block` as a block with `tag`: tag and length, their CRC, content, its CRC.
    async fn put_block(&mut self, tag: u8) -> Result<(), SnapshotError> {
        let mut frame = Vec::with_capacity(self.block.len() + 13);
        frame.push(tag);
        frame.extend_from_slice(&(self.block.len() as u32).to_be_bytes());
        self.crc.update(&frame);
        frame.extend_from_slice(&self.crc_now());
        self.crc.update(&self.block);
        frame.extend_from_slice(&self.block);
        frame.extend_from_slice(&self.crc_now());
        self.emit(&frame).await
    }

    async fn emit(&mut self, bytes: &[u8]) -> Result<(), SnapshotError> {
        self.out.write_all(bytes).await?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn crc_now(&self) -> [u8; 4] {
        self.crc.clone().finalize().to_be_bytes()
    }

    fn check_usable(&self) -> Result<(), SnapshotError> {
        if self.failed {
            return Err(invalid("the snapshot writer already failed".into()));
        }
        Ok(())
    }

    fn check_complete(&self) -> Result<(), SnapshotError> {
        match self.open {
            Some(open) if open.left > 0 => Err(invalid(format!(
                "section {} is incomplete: {} of its bytes were not written",
                open.number, open.left
            ))),
            _ => Ok(()),
        }
    }

    /// Marks the writer failed if `result` is an error: the output has a partial frame.
    fn poison<T>(&mut self, result: Result<T, SnapshotError>) -> Result<T, SnapshotError> {
        if result.is_err() {
            self.failed = true;
        }
        result
    }

    /// The capacity of its buffers, for the tests of bounded memory: (pending, compressed).
    #[cfg(test)]
    pub(super) fn buffer_capacity(&self) -> (usize, usize) {
        (self.pending.capacity(), self.encoder.capacity())
    }
}

fn invalid(message: String) -> SnapshotError {
    SnapshotError::InvalidInput(message)
}

impl<W> fmt::Debug for SnapshotWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotWriter")
            .field("sections", &self.sections)
            .field("total", &self.total)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}
