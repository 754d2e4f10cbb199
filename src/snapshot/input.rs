//! The reader's side of the stream: exact reads that count the offset and tell a truncation
//! from an I/O error, the running CRC, and the names of the file's parts for error messages.

use std::fmt;
use std::io::ErrorKind;

use crc32fast::Hasher;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::SnapshotError;

/// A part of the file, named in errors. Sections and chunks count from 1.
#[derive(Debug, Clone, Copy)]
pub(super) enum Place {
    Magic,
    Preamble,
    Header,
    /// What follows section `n` (0: the header): another section or the end block.
    After(u32),
    /// Section `n`'s header block.
    Section(u32),
    /// Chunk `chunk` of section `section`.
    Chunk {
        section: u32,
        chunk: u64,
    },
    End,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Place::Magic => f.write_str("the magic"),
            Place::Preamble => f.write_str("the preamble"),
            Place::Header => f.write_str("the header block"),
            Place::After(0) => f.write_str("the first section or the end block"),
            Place::After(n) => write!(f, "section {} or the end block", u64::from(n) + 1),
            Place::Section(n) => write!(f, "section {n}'s header"),
            Place::Chunk { section, chunk } => write!(f, "chunk {chunk} of section {section}"),
            Place::End => f.write_str("the end block"),
        }
    }
}

/// The input stream, with the count of bytes read and the running CRC.
#[derive(Debug)]
pub(super) struct Input<R> {
    inner: R,
    offset: u64,
    crc: Hasher,
}

impl<R: AsyncRead + Unpin> Input<R> {
    pub(super) fn new(inner: R) -> Self {
        Self {
            inner,
            offset: 0,
            crc: Hasher::new(),
        }
    }

    /// Bytes read so far.
    pub(super) fn offset(&self) -> u64 {
        self.offset
    }

    /// Adds bytes to the running CRC (the magic, read before it is known to be one).
    pub(super) fn cover(&mut self, bytes: &[u8]) {
        self.crc.update(bytes);
    }

    /// Reads as many bytes as `buf` holds, or fewer if the input ends; returns how many.
    pub(super) async fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize, SnapshotError> {
        let mut got = 0;
        while got < buf.len() {
            match self.inner.read(&mut buf[got..]).await {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) if err.kind() == ErrorKind::UnexpectedEof => break,
                Err(err) => return Err(SnapshotError::Io(err)),
            }
        }
        self.offset += got as u64;
        Ok(got)
    }

    /// Fills `buf`; the input ending first is [`SnapshotError::Truncated`] in `place`.
    pub(super) async fn read(&mut self, buf: &mut [u8], place: Place) -> Result<(), SnapshotError> {
        if self.read_up_to(buf).await? < buf.len() {
            return Err(SnapshotError::Truncated {
                offset: self.offset,
                what: place.to_string(),
            });
        }
        Ok(())
    }

    /// Fills `buf` and adds it to the running CRC.
    pub(super) async fn read_covered(
        &mut self,
        buf: &mut [u8],
        place: Place,
    ) -> Result<(), SnapshotError> {
        self.read(buf, place).await?;
        self.crc.update(buf);
        Ok(())
    }

    /// Reads a CRC field and compares it with the running CRC; a mismatch is
    /// [`SnapshotError::Corrupt`] at `start`, the beginning of the part it closes, saying
    /// `detail`.
    pub(super) async fn check_crc(
        &mut self,
        start: u64,
        place: Place,
        detail: &str,
    ) -> Result<(), SnapshotError> {
        let mut field = [0; 4];
        self.read(&mut field, place).await?;
        let expected = self.crc.clone().finalize();
        if u32::from_be_bytes(field) != expected {
            return Err(corrupt(start, place, detail));
        }
        Ok(())
    }

    /// Whether the input has ended; reads one byte if it has not.
    pub(super) async fn at_end(&mut self) -> Result<bool, SnapshotError> {
        Ok(self.read_up_to(&mut [0]).await? == 0)
    }
}

/// [`SnapshotError::Corrupt`] for `place`, starting at byte `start`.
pub(super) fn corrupt(start: u64, place: Place, detail: &str) -> SnapshotError {
    SnapshotError::Corrupt {
        offset: start,
        what: format!("{place}: {detail}"),
    }
}
