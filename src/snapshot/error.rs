//! What can go wrong writing or reading a snapshot file.

/// A snapshot file could not be written or read, or is not a valid one.
///
/// Offsets count bytes from the file's start. A reader reports the first problem it meets and
/// gives out no byte it has not verified; after an error, it and the writer refuse further use.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The input does not start with the snapshot magic `RBLOOMSN`: it is some other file.
    #[error("not a redbloom snapshot (it does not start with \"RBLOOMSN\")")]
    NotASnapshot,

    /// The file is a snapshot of a format version this code does not know (it reads version 1
    /// only); a newer redbloom may read it.
    #[error("snapshot format version {0} is not supported (this redbloom reads version 1)")]
    UnsupportedVersion(u16),

    /// The input ended before the snapshot's end block: the file was cut short.
    #[error("truncated snapshot: it ends at byte {offset}, in {what}")]
    Truncated {
        /// The input's length: where it ended.
        offset: u64,
        /// The part of the file that was being read.
        what: String,
    },

    /// A checksum does not match, or a verified field breaks a rule of the format: a byte was
    /// changed, or the file was written wrongly.
    #[error("corrupt snapshot at byte {offset}: {what}")]
    Corrupt {
        /// Where the damaged part starts (a block, a chunk, or the file itself).
        offset: u64,
        /// Which part, and what is wrong with it.
        what: String,
    },

    /// The input goes on after the snapshot's end block.
    #[error("unexpected bytes after the snapshot's end block, from byte {offset}")]
    TrailingBytes {
        /// Where the end block ends and the extra bytes begin.
        offset: u64,
    },

    /// The writer was given something the format cannot hold, or was used out of order (more
    /// bytes than a section declared, a section left incomplete, a string over 65,535 bytes...),
    /// or a reader or writer was used after an error; nothing was written for that call.
    #[error("invalid snapshot use: {0}")]
    InvalidInput(String),

    /// Every section of the file has expired since it was written (a window filter's
    /// generations that have all left the window): importing it would leave nothing.
    /// Nothing was written.
    #[error("the snapshot has expired: {what}; nothing was imported")]
    Expired {
        /// What expired.
        what: String,
    },

    /// Reading or writing the underlying stream failed.
    #[error("I/O error on the snapshot stream")]
    Io(#[from] std::io::Error),
}
